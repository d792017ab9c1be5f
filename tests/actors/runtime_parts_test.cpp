// The job controller's parts, each a plain value tested without a job: the
// checkpoint coordinator's window and lost checkpoints, the rollback policy's
// intensity, and the fault driver behind its hooks.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "actors/core/checkpoint_coordinator.hpp"
#include "actors/faults/fault_driver.hpp"
#include "actors/faults/link_faults.hpp"
#include "actors/job/rollback_policy.hpp"
#include "messages/errors.hpp"
#include "messages/protocol.hpp"
#include "built_by_hand.hpp"

using namespace keel;
using keel::test::part;
using namespace std::chrono_literals;

namespace {

using tp = std::chrono::steady_clock::time_point;

// Hooks that remember what the driver asked for.
struct recording_hooks : fault_hooks {
  std::vector<std::pair<std::string, fault_kind>> ended;
  std::vector<job_event> events;
  std::set<std::string> missing;  // actors end_actor cannot find
  // When set, end_actor answers nothing yet: the test completes each kill
  // (the runtime waiting for a name to be up).
  bool hold = false;
  std::vector<std::function<void(caf::error)>> held;
  void end_actor(const std::string& name, fault_kind how,
                 std::function<void(caf::error)> done) override {
    if (hold) {
      held.push_back(std::move(done));
      return;
    }
    if (missing.count(name))
      return done(make_error(errc::not_found, "'" + name + "' is not up"));
    ended.emplace_back(name, how);
    done({});
  }
  void record(job_event e) override { events.push_back(std::move(e)); }
};

std::vector<fault> plan(const std::string& text) {
  auto p = parse_fault_plan(text);
  REQUIRE_MESSAGE(p, describe(p.error()));
  return *p;
}

}  // namespace

TEST_CASE("the checkpoint window runs two intervals past the newest checkpoint released") {
  checkpoint_coordinator c(10, 5000ms);
  CHECK(c.windowed());
  CHECK(c.window() == 20);
  CHECK(c.committed(1, 10, {part(0, 10), part(1, 10)}));
  CHECK(c.window() == 30);
  CHECK_FALSE(c.committed(1, 10, {part(0, 10), part(1, 10)}));  // no move: not newer
  CHECK(c.given_up(20));
  CHECK(c.window() == 40);
  CHECK_FALSE(c.given_up(15));
  checkpoint_coordinator none(0, 5000ms);
  CHECK_FALSE(none.windowed());
}

TEST_CASE("a committed checkpoint's snapshots are what a shard restarts from, newest first") {
  checkpoint_coordinator c(10, 5000ms);
  c.committed(1, 10, {part(0, 10), part(1, 10)});
  c.committed(2, 20, {part(0, 20), part(1, 19)});
  c.committed(3, 30, {part(1, 30), part(0, 30)});  // any order
  auto s = c.snapshots()->for_shard(1);
  REQUIRE(s.size() == 2);  // the last two are kept
  CHECK(s[0].label == "checkpoint-3");
  CHECK(s[1].label == "checkpoint-2");
  REQUIRE(s[1].as<snapshot_ref>());
  CHECK(s[1].as<snapshot_ref>()->entry.file == "shard-1-step-19");
  c.rolled_back(10);
  CHECK(c.snapshots()->for_shard(0).empty());
  CHECK(c.window() == 30);
}

TEST_CASE("a checkpoint every worker waited for past the timeout counts as lost, once") {
  checkpoint_coordinator c(10, 100ms);
  tp t0{};
  CHECK_FALSE(c.watch(19, t0));  // inside the window: nobody waits
  CHECK_FALSE(c.next_deadline());
  CHECK_FALSE(c.watch(20, t0));  // the slowest worker reached the window
  REQUIRE(c.next_deadline());
  CHECK(*c.next_deadline() == t0 + 100ms);
  CHECK_FALSE(c.watch(20, t0 + 99ms));
  auto lost = c.watch(20, t0 + 100ms);
  REQUIRE(lost);
  CHECK(*lost == 10);
  CHECK(c.given_up(*lost));
  CHECK(c.window() == 30);
  CHECK_FALSE(c.watch(20, t0 + 200ms));  // the workers may go on
  // A commit while they wait resets the clock.
  CHECK_FALSE(c.watch(30, t0 + 300ms));
  c.committed(2, 20, {part(0, 20)});
  CHECK_FALSE(c.next_deadline());
}

TEST_CASE("rollbacks beyond the restart intensity within the period escalate, naming root") {
  rollback_policy p(2, 1000ms);
  tp t0{};
  CHECK_FALSE(p.admit(t0, "a"));
  CHECK_FALSE(p.admit(t0 + 10ms, "b"));
  auto err = p.admit(t0 + 20ms, "shard:0 restored behind the logs");
  REQUIRE(err);
  CHECK(is(err, errc::escalated));
  auto text = describe(err);
  CHECK(text.find("root: 3 rollbacks within 1000 ms") != std::string::npos);
  CHECK(text.find("shard:0 restored behind the logs") != std::string::npos);
  // OTP's boundary: a rollback exactly one period ago is outside the window.
  rollback_policy q(1, 1000ms);
  CHECK_FALSE(q.admit(t0, "a"));
  CHECK_FALSE(q.admit(t0 + 1000ms, "b"));
  CHECK(q.admit(t0 + 1500ms, "c"));
}

TEST_CASE("the fault driver fires step, time and count triggers in plan order through its hooks") {
  recording_hooks hooks;
  std::vector<size_t> counted;
  fault_driver d(plan("kill:shard:0@10,exit:worker:1@250ms,throw:checkpointer@push=3,"
                      "drop:worker:0>shard:1@12x2"),
                 std::filesystem::temp_directory_path(), hooks,
                 [&](size_t i) { counted.push_back(i); });
  d.fire_due(9, 100);
  CHECK(hooks.ended.empty());
  d.fire_due(10, 100);
  REQUIRE(hooks.ended.size() == 1);
  CHECK(hooks.ended[0] == std::make_pair(std::string("shard:0"), fault_kind::kill));
  CHECK(d.until_next(1000ms, 100) == 150ms);
  d.fire_due(12, 260);
  REQUIRE(hooks.ended.size() == 2);
  CHECK(hooks.ended[1].second == fault_kind::exit);
  // The third push crossing any link reaches the count.
  for (int i = 0; i < 3; ++i)
    d.links()->on_message("worker:1", "shard:0", msg_kind::push);
  REQUIRE(counted == std::vector<size_t>{2});
  d.count_reached(2);
  d.fire_due(12, 270);
  REQUIRE(hooks.ended.size() == 3);
  CHECK(hooks.ended[2] == std::make_pair(std::string("checkpointer"), fault_kind::raise));
  // The fault events name what was injected; kills say they killed.
  size_t killed = 0;
  for (auto& e : hooks.events)
    killed += e.kind == event_kind::fault && e.killed;
  CHECK(killed == 3);
  // Due together at step 12 and 260 ms, exit and drop fire in plan order.
  CHECK(d.injected() == "kill:shard:0@10,exit:worker:1@250ms,drop:worker:0>shard:1@12x2,"
                        "throw:checkpointer@push=3");
}

TEST_CASE("a second kill of one actor waits until it is back, and a kill that finds nobody is recorded") {
  recording_hooks hooks;
  fault_driver d(plan("kill:shard:0@5,kill:shard:0@6,kill:worker:9@6"),
                 std::filesystem::temp_directory_path(), hooks, [](size_t) {});
  hooks.missing.insert("worker:9");
  d.fire_due(6, 0);
  CHECK(hooks.ended.size() == 1);  // shard:0 once; it is not back yet
  d.back("shard:0");
  d.fire_due(6, 0);
  CHECK(hooks.ended.size() == 2);
  bool refused = false;
  for (auto& e : hooks.events)
    refused = refused || (e.actor == "worker:9" && !e.killed &&
                          e.detail.find("not killed") != std::string::npos);
  CHECK(refused);
  // Both kills of shard:0 took effect; the one that found nobody did not.
  CHECK(d.planned_injected() == 2);
  auto missed = d.close_run();
  REQUIRE(missed.size() == 1);
  CHECK(missed[0].rfind("kill:worker:9@6: ", 0) == 0);
}

TEST_CASE("a kill still looking for its target holds back the next kill of it, and one that fails frees it") {
  recording_hooks hooks;
  hooks.hold = true;
  fault_driver d(plan("kill:shard:0@5,kill:shard:0@6"), std::filesystem::temp_directory_path(), hooks,
                 [](size_t) {});
  d.fire_due(6, 0);
  REQUIRE(hooks.held.size() == 1);  // the second waits for the first's target to be back
  CHECK(d.planned_injected() == 0);
  CHECK(hooks.events.empty());      // nothing recorded before the kill is done
  hooks.held[0](make_error(errc::not_found, "'shard:0' is not up"));
  CHECK(d.planned_injected() == 0);
  REQUIRE(hooks.events.size() == 1);
  CHECK(hooks.events[0].detail.find("not killed") != std::string::npos);
  d.fire_due(6, 0);  // the failed kill did not end shard:0: the next one may
  REQUIRE(hooks.held.size() == 2);
  hooks.held[1]({});
  CHECK(d.planned_injected() == 1);
  CHECK(hooks.events.back().killed);
  auto missed = d.close_run();
  REQUIRE(missed.size() == 1);
  CHECK(missed[0].rfind("kill:shard:0@5: ", 0) == 0);
}

TEST_CASE("planned faults that never fired are named when the run ends, a postponed kill included") {
  recording_hooks hooks;
  fault_driver d(plan("kill:shard:0@5,kill:shard:0@6,drop:worker:0>shard:1@50,eio:fsync@900ms,"
                      "kill:worker:1@push=40"),
                 std::filesystem::temp_directory_path(), hooks, [](size_t) {});
  d.fire_due(10, 100);  // the second kill waits: shard:0 is not back
  REQUIRE(hooks.ended.size() == 1);
  CHECK(d.planned_injected() == 1);
  auto events_before = hooks.events.size();
  auto missed = d.close_run();
  REQUIRE(missed.size() == 4);
  CHECK(missed[0] == "kill:shard:0@6: the run ended while shard:0 was not back from an earlier kill");
  CHECK(missed[1] == "drop:worker:0>shard:1@50: the run ended before every worker completed step 50");
  CHECK(missed[2] == "eio:fsync@900ms: the run ended before 900 ms");
  CHECK(missed[3] == "kill:worker:1@push=40: the run ended before the 40th push message");
  // Each is on the timeline too, as a fault that ended nothing.
  REQUIRE(hooks.events.size() == events_before + 4);
  for (auto i = events_before; i < hooks.events.size(); ++i) {
    CHECK(hooks.events[i].kind == event_kind::fault);
    CHECK(!hooks.events[i].killed);
    CHECK(hooks.events[i].detail.rfind("not injected: the run ended", 0) == 0);
  }
  CHECK(hooks.events[events_before].actor == "shard:0");
  CHECK(hooks.events[events_before].fault == "kill:shard:0@6");
}

TEST_CASE("a resumed run does not count the faults of the run before it as missed") {
  recording_hooks hooks;
  fault_driver d(plan("kill:shard:0@5,kill:worker:0@30"), std::filesystem::temp_directory_path(), hooks,
                 [](size_t) {});
  d.skip_through(20);
  d.fire_due(30, 0);
  CHECK(hooks.ended.size() == 1);
  CHECK(d.planned_injected() == 1);
  CHECK(d.close_run().empty());
}

TEST_CASE("node faults: kill9, stop and cut target node:N, and a job in one process refuses them") {
  auto p = plan("kill9:node:1@40,stop:node:0@2000ms,cut:node:2@push=50+1500ms");
  REQUIRE(p.size() == 3);
  CHECK(p[0].kind == fault_kind::kill9);
  CHECK(p[0].is_node_fault());
  CHECK(p[2].delay_ms == 1500);
  CHECK(to_string(p) == "kill9:node:1@40,stop:node:0@2000ms,cut:node:2@push=50+1500ms");
  CHECK(!check_fault_plan(p, 2, 2, 3));
  auto no_nodes = check_fault_plan(p, 2, 2, 0);
  REQUIRE(no_nodes);
  CHECK(describe(no_nodes).find("runs in one process") != std::string::npos);
  auto too_few = check_fault_plan(p, 2, 2, 2);
  REQUIRE(too_few);
  CHECK(describe(too_few).find("no node:2") != std::string::npos);
  for (auto bad : {"kill9:shard:0@4", "kill:node:1@4", "cut:node:1@4", "stop:node:1@4+10ms",
                   "drop:node:1>shard:0@4"}) {
    CAPTURE(bad);
    CHECK(!parse_fault_plan(bad));
  }
  // A job in one process has no node to fault: the hook refuses by default.
  recording_hooks hooks;
  fault_driver d(p, std::filesystem::temp_directory_path(), hooks, [](size_t) {});
  caf::error err;
  d.inject(p[0], [&](caf::error e) { err = std::move(e); });
  REQUIRE(err);
  CHECK(describe(err).find("one process") != std::string::npos);
}

TEST_CASE("network node faults: partition, split and oneway target node:N and heal after +MSms") {
  auto p = plan("partition:node:1@50+2000ms,split:node:0@3000ms+500ms,oneway:node:2@push=9+700ms");
  REQUIRE(p.size() == 3);
  CHECK(p[0].kind == fault_kind::partition);
  CHECK(p[1].kind == fault_kind::split);
  CHECK(p[2].kind == fault_kind::oneway);
  for (auto& f : p) {
    CHECK(f.is_node_fault());
    CHECK(f.is_network_fault());
  }
  CHECK(p[0].delay_ms == 2000);
  CHECK(to_string(p) == "partition:node:1@50+2000ms,split:node:0@3000ms+500ms,oneway:node:2@push=9+700ms");
  CHECK(!check_fault_plan(p, 2, 2, 3));
  CHECK(check_fault_plan(p, 2, 2, 0));
  for (auto bad : {"partition:node:1@4", "split:shard:0@4+10ms", "oneway:worker:1@4+10ms"}) {
    CAPTURE(bad);
    CHECK(!parse_fault_plan(bad));
  }
  auto why = parse_fault_plan("partition:node:1@4");
  REQUIRE(!why);
  CHECK(describe(why.error()).find("a partition needs +MSms") != std::string::npos);
}
