// Strategies decide which children restart together; restart types decide
// whether a child restarts at all. Every strategy meets every restart type.
#include "support.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

namespace {

uint64_t incarnation_of(const std::vector<child_info>& cs, const std::string& id) {
  for (const auto& c : cs)
    if (c.id == id)
      return c.incarnation;
  return 0;
}

bool has_child(const std::vector<child_info>& cs, const std::string& id) {
  return incarnation_of(cs, id) != 0;
}

std::vector<std::string> ids_of(const std::vector<event>& es) {
  std::vector<std::string> out;
  for (const auto& e : es)
    out.push_back(e.child);
  return out;
}

}  // namespace

TEST_CASE("one_for_one restarts only the child that failed") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one,
                            {worker_spec("a"), worker_spec("b"), worker_spec("c")}));
  f.expect_n(event_kind::start, 3);
  f.crash("b");
  auto r = f.expect(event_kind::restart, "b");
  CHECK(r.incarnation == 2);
  auto cs = f.children_of(t.root());
  CHECK(incarnation_of(cs, "a") == 1);
  CHECK(incarnation_of(cs, "b") == 2);
  CHECK(incarnation_of(cs, "c") == 1);
  CHECK(std::get<1>(f.who(f.handle_of("b"))) == 2);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("one_for_all stops the others in reverse start order, then starts all in order") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_all,
                            {worker_spec("a"), worker_spec("b"), worker_spec("c")}));
  f.expect_n(event_kind::start, 3);
  f.crash("b");
  f.expect(event_kind::down, "b");
  auto stopped = f.expect_n(event_kind::shutdown, 2);
  CHECK(ids_of(stopped) == std::vector<std::string>{"c", "a"});
  auto restarted = f.expect_n(event_kind::restart, 3);
  CHECK(ids_of(restarted) == std::vector<std::string>{"a", "b", "c"});
  for (const auto& e : restarted)
    CHECK(e.incarnation == 2);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("rest_for_one restarts the failed child and the children started after it") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::rest_for_one,
                            {worker_spec("a"), worker_spec("b"), worker_spec("c")}));
  f.expect_n(event_kind::start, 3);
  f.crash("b");
  CHECK(f.expect(event_kind::shutdown, "c").incarnation == 1);
  auto restarted = f.expect_n(event_kind::restart, 2);
  CHECK(ids_of(restarted) == std::vector<std::string>{"b", "c"});
  auto cs = f.children_of(t.root());
  CHECK(incarnation_of(cs, "a") == 1);
  CHECK(incarnation_of(cs, "c") == 2);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("simple_one_for_one starts and terminates children of one template at run time") {
  fixture f;
  auto t = f.start(sup_spec("pool", strategy::simple_one_for_one, {worker_spec("template")}));
  CHECK(f.children_of(t.root()).empty());
  auto w1 = start_child(f.sys, t.root(), "w1");
  auto w2 = start_child(f.sys, t.root(), "w2");
  REQUIRE(w1);
  REQUIRE(w2);
  CHECK(std::get<0>(f.who(*w2)) == "w2");
  auto dup = start_child(f.sys, t.root(), "w1");
  CHECK(is(dup.error(), errc::invalid_argument));
  f.crash("w1");
  CHECK(f.expect(event_kind::restart, "w1").incarnation == 2);
  CHECK_FALSE(terminate_child(f.sys, t.root(), "w2"));
  f.expect(event_kind::shutdown, "w2");
  auto cs = f.children_of(t.root());
  REQUIRE(cs.size() == 1);
  CHECK(cs[0].id == "w1");
  CHECK(is(terminate_child(f.sys, t.root(), "w2"), errc::not_found));
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a dynamic child spec added with start_child starts last and is supervised") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {worker_spec("a")}));
  REQUIRE(start_child(f.sys, t.root(), worker_spec("late")));
  f.crash("late");
  CHECK(f.expect(event_kind::restart, "late").incarnation == 2);
  CHECK(f.children_of(t.root()).back().id == "late");
  CHECK_FALSE(t.shutdown(wait_budget));
}

// For every strategy and restart type: child "x" (of that type, between two
// permanent siblings) first crashes, then, if it came back, exits normally.
TEST_CASE("every strategy restarts permanent children always, transient ones only after a crash, "
          "temporary ones never") {
  const strategy strategies[] = {strategy::one_for_one, strategy::one_for_all,
                                 strategy::rest_for_one, strategy::simple_one_for_one};
  const restart_type types[] = {restart_type::permanent, restart_type::transient,
                                restart_type::temporary};
  for (auto s : strategies) {
    for (auto r : types) {
      CAPTURE(static_cast<int>(s));
      CAPTURE(static_cast<int>(r));
      fixture f;
      bool pool = s == strategy::simple_one_for_one;
      auto spec = pool ? sup_spec("sup", s, {worker_spec("tmpl", r)})
                       : sup_spec("sup", s, {worker_spec("a"), worker_spec("x", r), worker_spec("c")});
      auto t = f.start(spec);
      if (pool)
        for (auto id : {"a", "x", "c"})
          REQUIRE(start_child(f.sys, t.root(), id));
      f.crash("x");
      auto down = f.expect(event_kind::down, "x");
      CHECK(down.will_restart == (r != restart_type::temporary));
      if (r == restart_type::temporary) {
        // Forgotten; siblings untouched, and the name is gone.
        auto cs = f.children_of(t.root());
        CHECK_FALSE(has_child(cs, "x"));
        CHECK(incarnation_of(cs, "a") == 1);
        CHECK(incarnation_of(cs, "c") == 1);
        CHECK(lookup(f.sys, f.directory, "x")->state == name_state::gone);
        CHECK_FALSE(t.shutdown(wait_budget));
        continue;
      }
      f.expect(event_kind::restart, "x");
      auto cs = f.children_of(t.root());
      CHECK(incarnation_of(cs, "x") == 2);
      bool all = s == strategy::one_for_all;
      bool rest = all || s == strategy::rest_for_one;
      CHECK(incarnation_of(cs, "a") == (all ? 2 : 1));
      CHECK(incarnation_of(cs, "c") == (rest ? 2 : 1));
      // A normal exit: only a permanent child comes back.
      f.self->send(f.handle_of("x"), quit_atom::value);
      down = f.expect(event_kind::down, "x");
      CHECK(down.will_restart == (r == restart_type::permanent));
      if (r == restart_type::permanent) {
        CHECK(f.expect(event_kind::restart, "x").incarnation == 3);
      } else {
        cs = f.children_of(t.root());
        // A transient child that ended normally stays stopped (a pool forgets it).
        if (pool)
          CHECK_FALSE(has_child(cs, "x"));
        for (const auto& c : cs)
          if (c.id == "x")
            CHECK_FALSE(c.running);
      }
      CHECK_FALSE(t.shutdown(wait_budget));
    }
  }
}

TEST_CASE("a temporary sibling stopped by another child's failure is not restarted") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_all,
                            {worker_spec("a"), worker_spec("tmp", restart_type::temporary),
                             worker_spec("c")}));
  f.expect_n(event_kind::start, 3);
  f.crash("c");
  auto restarted = f.expect_n(event_kind::restart, 2);
  CHECK(ids_of(restarted) == std::vector<std::string>{"a", "c"});
  auto cs = f.children_of(t.root());
  CHECK_FALSE(has_child(cs, "tmp"));
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("children that crash at the same time are each restarted under one_for_one") {
  fixture f;
  std::vector<child_spec> cs;
  for (int i = 0; i < 6; ++i)
    cs.push_back(worker_spec("w" + std::to_string(i)));
  auto t = f.start(sup_spec("root", strategy::one_for_one, cs, 20));
  std::vector<caf::actor> handles;
  for (int i = 0; i < 6; ++i)
    handles.push_back(f.handle_of("w" + std::to_string(i)));
  for (auto& h : handles)
    f.self->send(h, crash_atom::value);
  auto restarted = f.expect_n(event_kind::restart, 6);
  for (auto& c : f.children_of(t.root())) {
    CHECK(c.incarnation == 2);
    CHECK(c.running);
  }
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("children that crash at the same time under one_for_all are restarted together once") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_all,
                            {worker_spec("a"), worker_spec("b"), worker_spec("c")}, 20));
  std::vector<caf::actor> handles{f.handle_of("a"), f.handle_of("b"), f.handle_of("c")};
  for (auto& h : handles)
    f.self->send(h, crash_atom::value);
  auto restarted = f.expect_n(event_kind::restart, 3);
  CHECK(ids_of(restarted) == std::vector<std::string>{"a", "b", "c"});
  for (auto& c : f.children_of(t.root()))
    CHECK(c.incarnation == 2);
  CHECK_FALSE(t.shutdown(wait_budget));
}
