// Start, with a pending start (child_spec::start_pending): the supervisor
// asks an actor for the child and awaits the answer as a message. The
// ordered start waits for it; an error answer, or none within the spec's
// start_timeout on the tree's clock, is a failed start exactly as a start
// function's error is; a handle answered too late is killed. A blocking
// start function run on its own thread (start_on_own_thread) is such a
// pending start, and holds no scheduler thread while it blocks.
#include <future>

#include "support.hpp"
#include "supervision/own_thread_start.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

namespace {

using place_atom = caf::atom_constant<caf::atom("t_place")>;      // (id, incarnation) -> actor
using asked_atom = caf::atom_constant<caf::atom("t_asked")>;      // gate -> test: (id, incarnation)
using release_atom = caf::atom_constant<caf::atom("t_release")>;  // test -> gate: answer what it holds
using late_atom = caf::atom_constant<caf::atom("t_late")>;        // gate -> test: (the handle it gave)

// How a gate answers: spawn the child at once, hold the ask until released
// (telling the test it was asked), or refuse incarnations listed.
struct gate_options {
  bool hold = false;
  std::vector<uint64_t> refuse;
  caf::actor test;
};

struct gate_state {
  std::vector<std::pair<caf::response_promise, restart_context>> held;
};

caf::behavior gate(caf::stateful_actor<gate_state>* self, gate_options o) {
  auto spawn_child = [self](const std::string& id, uint64_t incarnation) {
    restart_context ctx;
    ctx.id = id;
    ctx.incarnation = incarnation;
    return self->spawn(worker, ctx, worker_options{});
  };
  return {
    [=](place_atom, const std::string& id, uint64_t incarnation) -> caf::result<caf::actor> {
      if (std::find(o.refuse.begin(), o.refuse.end(), incarnation) != o.refuse.end())
        return make_error(errc::not_found, "no node takes " + id + " #" + std::to_string(incarnation));
      if (!o.hold)
        return spawn_child(id, incarnation);
      restart_context ctx;
      ctx.id = id;
      ctx.incarnation = incarnation;
      self->state.held.emplace_back(self->make_response_promise(), ctx);
      self->send(o.test, asked_atom::value, id, incarnation);
      return caf::delegated<caf::actor>{};
    },
    [=](release_atom) {
      for (auto& [rp, ctx] : self->state.held) {
        auto h = spawn_child(ctx.id, ctx.incarnation);
        self->send(o.test, late_atom::value, h);
        rp.deliver(h);
      }
      self->state.held.clear();
    },
  };
}

child_spec placed(const std::string& id, const caf::actor& g, std::chrono::milliseconds timeout = 1s) {
  child_spec c;
  c.id = id;
  c.start_pending = [g](caf::actor_system&, const restart_context& ctx) -> caf::expected<pending_start> {
    return pending_start{g, caf::make_message(place_atom::value, ctx.id, ctx.incarnation)};
  };
  c.start_timeout = timeout;
  return c;
}

// Waits for the gate's note that `id` was asked for; returns its incarnation.
uint64_t await_asked(fixture& f, const std::string& id) {
  uint64_t got = 0;
  bool timed_out = false;
  f.self->receive([&](asked_atom, const std::string& who, uint64_t inc) {
                    CHECK(who == id);
                    got = inc;
                  },
                  caf::after(wait_budget) >> [&] { timed_out = true; });
  REQUIRE_FALSE(timed_out);
  return got;
}

}  // namespace

TEST_CASE("a pending start's answer is the child, and the ordered start goes on only after it") {
  fixture f;
  auto g = f.sys.spawn(gate, gate_options{true, {}, f.self});
  auto t = tree::launch(f.sys, sup_spec("root", strategy::one_for_one, {placed("a", g), worker_spec("b")}),
                        f.options());
  CHECK(await_asked(f, "a") == 1);
  // Asked and unanswered: b, next in order, has not started.
  auto b = lookup(f.sys, f.directory, "b");
  CHECK((!b || b->state != name_state::up));
  f.self->send(g, release_atom::value);
  auto first = f.expect([](const event& e) { return e.kind == event_kind::start; });
  CHECK(first.child == "a");
  CHECK(f.expect(event_kind::start, "b").incarnation == 1);
  CHECK(std::get<1>(f.who(f.handle_of("a"))) == 1);
  CHECK_FALSE(t.shutdown(wait_budget));
  f.self->send_exit(g, caf::exit_reason::user_shutdown);
}

TEST_CASE("a pending start answered with an error is a failed start, retried and counted by the intensity") {
  fixture f;
  auto g = f.sys.spawn(gate, gate_options{false, {2}, f.self});
  auto t = f.start(sup_spec("root", strategy::one_for_one, {placed("a", g)}, 5));
  f.crash("a");
  f.expect(event_kind::down, "a");
  auto failed = f.expect(event_kind::down, "a");  // the refused start
  CHECK(is(failed.reason, errc::start_failed));
  CHECK(describe(failed.reason).find("no node takes a #2") != std::string::npos);
  CHECK(failed.will_restart);
  // A refused attempt uses up no incarnation: the next one is #2 again,
  // which the gate refuses again; the intensity bounds the retries.
  auto why = t.await(wait_budget);
  REQUIRE(is(why, errc::escalated));
  CHECK(describe(why).find("no node takes a #2") != std::string::npos);
  f.self->send_exit(g, caf::exit_reason::user_shutdown);
}

TEST_CASE("a pending start unanswered within the spec's start timeout fails the supervisor's start, "
          "naming the child") {
  fixture f;
  auto g = f.sys.spawn(gate, gate_options{true, {}, f.self});
  auto t = tree::launch(f.sys, sup_spec("root", strategy::one_for_one, {placed("a", g, 800ms), worker_spec("b")}),
                        f.options());
  await_asked(f, "a");
  f.clk->advance(800ms);
  auto why = t.await(wait_budget);
  REQUIRE(is(why, errc::start_failed));
  CHECK(describe(why).find("child 'a' incarnation 1") != std::string::npos);
  CHECK(describe(why).find("within 800 ms") != std::string::npos);
  for (const auto& e : f.seen)
    CHECK(e.child != "b");
  f.self->send_exit(g, caf::exit_reason::user_shutdown);
}

TEST_CASE("a child answered after its pending start timed out is killed") {
  fixture f;
  auto g = f.sys.spawn(gate, gate_options{true, {}, f.self});
  auto t = tree::launch(f.sys, sup_spec("root", strategy::one_for_one, {worker_spec("b")}), f.options());
  f.expect(event_kind::start, "b");
  auto added = std::async(std::launch::async, [&] { return start_child(f.sys, t.root(), placed("a", g), wait_budget); });
  await_asked(f, "a");
  f.clk->advance(1s);
  auto refused = added.get();
  REQUIRE_FALSE(refused);
  CHECK(is(refused.error(), errc::start_failed));
  f.self->send(g, release_atom::value);
  caf::actor late;
  f.self->receive([&](late_atom, caf::actor& h) { late = h; }, caf::after(wait_budget) >> [] { FAIL("no late answer"); });
  f.self->monitor(late);
  caf::error reason;
  f.self->receive([&](caf::down_msg& dm) { reason = dm.reason; },
                  caf::after(wait_budget) >> [] { FAIL("the late child lives on"); });
  CHECK(reason == caf::exit_reason::kill);
  CHECK_FALSE(t.shutdown(wait_budget));
  f.self->send_exit(g, caf::exit_reason::user_shutdown);
}

TEST_CASE("start_child with a pending start answers with the placed child") {
  fixture f;
  auto g = f.sys.spawn(gate, gate_options{false, {}, f.self});
  auto t = f.start(sup_spec("root", strategy::one_for_one, {worker_spec("b")}));
  auto h = start_child(f.sys, t.root(), placed("a", g), wait_budget);
  REQUIRE_MESSAGE(h, describe(h.error()));
  CHECK(*h == f.handle_of("a"));
  CHECK(std::get<0>(f.who(*h)) == "a");
  CHECK_FALSE(t.shutdown(wait_budget));
  f.self->send_exit(g, caf::exit_reason::user_shutdown);
}

TEST_CASE("blocking start functions run on their own threads leave every scheduler thread free") {
  fixture f;  // a scheduler of two threads
  // Two supervisors whose children's start functions block until released:
  // run on the supervisors' own threads they would hold both.
  auto release = std::make_shared<std::promise<void>>();
  auto released = release->get_future().share();
  // Released on every way out, so that a failed check does not leave the
  // start threads (and the actor system's end) waiting for ever.
  std::shared_ptr<void> release_at_exit(nullptr, [release](void*) {
    try {
      release->set_value();
    } catch (const std::future_error&) {
    }
  });
  std::vector<std::shared_ptr<std::promise<void>>> entered;
  std::vector<tree> trees;
  for (int i = 0; i < 2; ++i) {
    auto in = std::make_shared<std::promise<void>>();
    entered.push_back(in);
    auto c = worker_spec("blocked");
    auto start = c.start;
    c.start = [=](caf::actor_system& sys, const restart_context& ctx) -> caf::expected<caf::actor> {
      in->set_value();
      released.wait();
      return start(sys, ctx);
    };
    trees.push_back(tree::launch(f.sys, sup_spec("root" + std::to_string(i), strategy::one_for_one,
                                                 {start_on_own_thread(c, 10s)}),
                                 f.options()));
  }
  for (auto& in : entered)
    REQUIRE(in->get_future().wait_for(wait_budget) == std::future_status::ready);
  // Both starts block now; an actor on the scheduler still answers.
  auto echo = f.sys.spawn([]() -> caf::behavior { return {[](int x) { return x + 1; }}; });
  int answer = 0;
  f.self->request(echo, 2s, 41).receive([&](int x) { answer = x; }, [](caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(answer == 42);
  release_at_exit.reset();
  CHECK(f.expect_n(event_kind::start, 2).size() == 2);
  for (auto& t : trees)
    CHECK_FALSE(t.shutdown(wait_budget));
  f.self->send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST_CASE("a blocking start function run on its own thread fails a start with its error, as in place") {
  fixture f;
  auto c = worker_spec("a");
  c.start = [](caf::actor_system&, const restart_context& ctx) -> caf::expected<caf::actor> {
    return make_error(errc::not_found, "no node takes " + ctx.id);
  };
  auto t = tree::start(f.sys, sup_spec("root", strategy::one_for_one, {start_on_own_thread(c, 10s)}), f.options());
  REQUIRE_FALSE(t);
  CHECK(is(t.error(), errc::start_failed));
  CHECK(describe(t.error()).find("child 'a' incarnation 1: ") != std::string::npos);
  CHECK(describe(t.error()).find("no node takes a") != std::string::npos);
}

TEST_CASE("a child started on its own thread for a supervisor killed meanwhile is killed too") {
  fixture f;
  auto release = std::make_shared<std::promise<void>>();
  auto released = release->get_future().share();
  std::shared_ptr<void> release_at_exit(nullptr, [release](void*) {
    try {
      release->set_value();
    } catch (const std::future_error&) {
    }
  });
  auto in = std::make_shared<std::promise<void>>();
  auto made = std::make_shared<std::promise<caf::actor>>();
  auto c = worker_spec("a");
  auto start = c.start;
  c.start = [=](caf::actor_system& sys, const restart_context& ctx) -> caf::expected<caf::actor> {
    in->set_value();
    released.wait();
    auto h = start(sys, ctx);
    made->set_value(*h);
    return h;
  };
  auto t = tree::launch(f.sys, sup_spec("root", strategy::one_for_one, {start_on_own_thread(c, 10s)}), f.options());
  REQUIRE(in->get_future().wait_for(wait_budget) == std::future_status::ready);
  f.self->monitor(t.root());
  f.self->send_exit(t.root(), caf::exit_reason::kill);
  f.self->receive([](caf::down_msg&) {}, caf::after(wait_budget) >> [] { FAIL("the root lives on"); });
  release_at_exit.reset();
  auto child = made->get_future();
  REQUIRE(child.wait_for(wait_budget) == std::future_status::ready);
  auto h = child.get();
  f.self->monitor(h);
  caf::error reason;
  f.self->receive([&](caf::down_msg& dm) { reason = dm.reason; },
                  caf::after(wait_budget) >> [] { FAIL("the orphan lives on"); });
  CHECK(reason == caf::exit_reason::kill);
}
