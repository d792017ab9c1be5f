// Ordered start, reverse shutdown, and each child's shutdown policy.
#include "support.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

namespace {

std::vector<std::string> children_in(const std::vector<event>& es) {
  std::vector<std::string> out;
  for (const auto& e : es)
    out.push_back(e.supervisor + "/" + e.child);
  return out;
}

}  // namespace

TEST_CASE("children start in order and stop in reverse order, nested supervisors included") {
  fixture f;
  auto sub = sup_spec("sub", strategy::one_for_one, {worker_spec("x"), worker_spec("y")});
  auto t = f.start(sup_spec("root", strategy::one_for_one,
                            {worker_spec("a"), supervisor_child(sub), worker_spec("b")}));
  auto started = children_in(f.expect_n(event_kind::start, 5));
  auto at = [&](const std::string& name) {
    return std::find(started.begin(), started.end(), name) - started.begin();
  };
  // "root/sub" is reported when spawned; its children start before "root/b".
  CHECK(at("root/a") == 0);
  CHECK(at("sub/x") < at("sub/y"));
  CHECK(at("sub/y") < at("root/b"));
  CHECK(at("root/sub") < at("root/b"));
  CHECK(at("root/b") == 4);
  CHECK_FALSE(t.shutdown(wait_budget));
  auto stopped = f.expect_n(event_kind::shutdown, 5);
  CHECK(children_in(stopped) ==
        std::vector<std::string>{"root/b", "sub/y", "sub/x", "root/sub", "root/a"});
  for (const auto& e : stopped)
    CHECK(e.reason == caf::exit_reason::user_shutdown);
}

TEST_CASE("a child that ignores shutdown is killed when its shutdown timeout runs out") {
  fixture f;
  worker_options stubborn;
  stubborn.stubborn = true;
  stubborn.notify = f.self;
  auto mule = worker_spec("mule", restart_type::permanent, stubborn);
  mule.shutdown = shutdown_policy::after(2s);
  auto t = f.start(sup_spec("root", strategy::one_for_one, {worker_spec("a"), mule}));
  auto mule_handle = f.handle_of("mule");
  f.self->send_exit(t.root(), caf::exit_reason::user_shutdown);
  f.self->receive([](ignored_atom, const std::string& id) { CHECK(id == "mule"); },
                  caf::after(wait_budget) >> [] { FAIL("the mule never saw the shutdown"); });
  // The kill timer runs on the tree's clock: nothing happens until it is due.
  REQUIRE(f.clk->next_due_in() == std::chrono::nanoseconds(2s));
  f.clk->advance(2s - 1ns);
  CHECK(std::get<0>(f.who(mule_handle)) == "mule");  // still alive
  f.clk->advance(1ns);
  auto killed = f.expect(event_kind::shutdown, "mule");
  CHECK(killed.reason == caf::exit_reason::kill);
  CHECK(f.expect(event_kind::shutdown, "a").reason == caf::exit_reason::user_shutdown);
  CHECK_FALSE(t.await(wait_budget));
}

TEST_CASE("brutal_kill stops a child at once with exit_reason::kill") {
  fixture f;
  worker_options stubborn;
  stubborn.stubborn = true;
  auto c = worker_spec("k", restart_type::permanent, stubborn);
  c.shutdown = shutdown_policy::brutal_kill();
  auto t = f.start(sup_spec("root", strategy::one_for_one, {c}));
  CHECK_FALSE(t.shutdown(wait_budget));
  CHECK(f.expect(event_kind::shutdown, "k").reason == caf::exit_reason::kill);
  CHECK(f.clk->pending() == 0);
}

TEST_CASE("a supervisor killed outright takes its children with it") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {worker_spec("a")}));
  auto a = f.handle_of("a");
  f.self->monitor(a);
  f.self->send_exit(t.root(), caf::exit_reason::kill);
  bool down = false;
  f.self->receive([&](caf::down_msg& dm) { down = dm.source == a.address(); },
                  caf::after(wait_budget) >> [] {});
  CHECK(down);
  CHECK(t.await(wait_budget) == caf::exit_reason::kill);
}
