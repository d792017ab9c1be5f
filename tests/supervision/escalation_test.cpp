// Restart intensity: too many restarts in the period and a supervisor gives
// up, stops its children in reverse order and escalates to its parent.
#include "support.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

TEST_CASE("a supervisor over its restart intensity stops its children in reverse order and "
          "escalates with the child's name and last failure") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one,
                            {worker_spec("a"), worker_spec("b"), worker_spec("c")},
                            /*max_restarts=*/1));
  f.expect_n(event_kind::start, 3);
  f.crash("b");
  f.expect(event_kind::restart, "b");
  f.crash("b");  // second restart within 5 s on a clock that stands still
  auto esc = f.expect([](const event& e) { return e.kind == event_kind::escalate; });
  CHECK(esc.child == "b");
  std::vector<std::string> order;
  for (const auto& e : f.expect_n(event_kind::shutdown, 2))
    order.push_back(e.child);
  CHECK(order == std::vector<std::string>{"c", "a"});
  auto why = t.await(wait_budget);
  REQUIRE(is(why, errc::escalated));
  auto text = describe(why);
  CHECK(text.find("'root'") != std::string::npos);
  CHECK(text.find("child 'b'") != std::string::npos);
  CHECK(text.find("injected crash") != std::string::npos);
  for (auto name : {"a", "b", "c"})
    CHECK(lookup(f.sys, f.directory, name)->state == name_state::gone);
}

TEST_CASE("restarts spread wider than the intensity period never escalate") {
  fixture f;
  auto spec = sup_spec("root", strategy::one_for_one, {worker_spec("a")}, 1);
  auto t = f.start(spec);
  for (uint64_t i = 2; i <= 5; ++i) {
    f.crash("a");
    CHECK(f.expect(event_kind::restart, "a").incarnation == i);
    f.clk->advance(spec.period);
  }
  CHECK(is(t.await(std::chrono::milliseconds(1)), errc::timeout));
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("escalation climbs three levels of supervisors and the root's error names every "
          "level, the child and its last failure") {
  fixture f;
  worker_options doomed;
  doomed.crash_on_init = true;  // every incarnation dies at once: a restart storm
  auto l3 = sup_spec("l3", strategy::one_for_one, {worker_spec("worker", restart_type::permanent, doomed)}, 1);
  auto l2 = sup_spec("l2", strategy::one_for_one, {supervisor_child(l3)}, 1);
  auto l1 = sup_spec("l1", strategy::one_for_one, {worker_spec("bystander"), supervisor_child(l2)}, 1);
  // The storm may end before start() returns; then start() reports why.
  auto t = tree::start(f.sys, l1, f.options());
  auto why = t ? t->await(wait_budget) : t.error();
  REQUIRE(is(why, errc::escalated));
  auto text = describe(why);
  for (auto part : {"'l1'", "child 'l2'", "'l2'", "child 'l3'", "'l3'", "child 'worker'",
                    "crash while initialising"})
    CHECK_MESSAGE(text.find(part) != std::string::npos, part, " in ", text);
  // Each level escalated, the innermost first, the root last.
  std::vector<std::string> escalations;
  for (;;) {
    auto e = f.expect([](const event& e) { return e.kind == event_kind::escalate; });
    escalations.push_back(e.supervisor);
    if (e.supervisor == "l1")
      break;
  }
  CHECK(escalations.front() == "l3");
  CHECK(std::find(escalations.begin(), escalations.end(), "l2") != escalations.end());
  CHECK(escalations.back() == "l1");
  CHECK(lookup(f.sys, f.directory, "bystander")->state == name_state::gone);
}
