// The chaos suite's CI tier: seeded random fault plans (kills of every actor
// kind including supervisors; message drops, duplicates, delays and
// reorders on every link; storage write and fsync failures, tears and bit
// flips; at steps, times and message counts) against short runs of the probe and
// the sparse model, each checking keel's promises (actors/chaos/chaos.hpp). A
// failing seed prints the plan that reproduces it.
#include <map>

#include "job_fixture.hpp"
#include "test_tier.hpp"

using namespace keel;
using namespace keel::test;

namespace {

chaos_options options(std::shared_ptr<const model> m, const temp_dir& dir, consistency rule) {
  return chaos_setup(std::move(m), dir, rule, 40, 8, 4, std::chrono::milliseconds(100));
}

void check_all(const std::vector<chaos_run>& runs, uint64_t expected) {
  CHECK(runs.size() == expected);
  uint64_t faults = 0, planned = 0, recoveries = 0;
  std::map<std::string, uint64_t> missed;  // why planned faults did not take effect
  for (auto& r : runs) {
    faults += r.faults;
    planned += r.planned;
    recoveries += r.recoveries;
    for (auto& m : r.not_injected) {
      ++missed[m.substr(m.find(": ") + 2)];
      if (m.find("completed step") != std::string::npos)
        MESSAGE("seed " << r.seed << " missed " << m << "\n  replay: --faults '" << r.plan << "'");
    }
    CHECK_MESSAGE(r.ok(), "seed " << r.seed << ": " << r.problem << "\n  replay: --faults '" << r.plan << "'");
  }
  MESSAGE(runs.size() << " seeds, " << faults << " of " << planned << " planned faults injected, " << recoveries
                      << " recoveries");
  uint64_t at_steps = 0;
  for (auto& [why, n] : missed) {
    MESSAGE(n << " not injected: " << why);
    at_steps += why.find("completed step") != std::string::npos ? n : 0;
  }
  // Every run completes its steps, so a fault due at a step always comes
  // due. Others may not, and how many depends on the machine's speed: a
  // time or message count a short run never reaches, a snapshot to damage
  // before one was stored.
  CHECK(at_steps == 0);
  CHECK(recoveries > 0);  // the plans really hit the job
}

}  // namespace

KEEL_RELEASE_TEST_CASE("200 seeded fault plans against BSP probe runs: exactly once, bit-identical, no hang") {
  temp_dir dir;
  check_all(run_chaos(options(probe_with_table(), dir, {consistency_kind::bsp, 0}), 1, 200), 200);
}

// A slice of the slow tier's 2000-seed run (chaos_slow_test.cpp): its setup
// (60 steps, 5 faults a plan), its first seeds, in two halves that ctest
// runs side by side.
KEEL_RELEASE_TEST_CASE("the long chaos run's first 100 seeds against BSP probe runs, 5 faults each") {
  temp_dir dir;
  auto o = chaos_setup(probe_with_table(), dir, {consistency_kind::bsp, 0}, 60, 10, 5, std::chrono::milliseconds(200));
  check_all(run_chaos(o, 10000, 100), 100);
}

KEEL_RELEASE_TEST_CASE("the long chaos run's next 100 seeds against BSP probe runs, 5 faults each") {
  temp_dir dir;
  auto o = chaos_setup(probe_with_table(), dir, {consistency_kind::bsp, 0}, 60, 10, 5, std::chrono::milliseconds(200));
  check_all(run_chaos(o, 10100, 100), 100);
}

TEST_CASE("fault plans against ASP and SSP probe runs apply every acknowledged push exactly once") {
  temp_dir dir;
  check_all(run_chaos(options(probe_with_table(), dir, {consistency_kind::asp, 0}), 1001, 25), 25);
  check_all(run_chaos(options(probe_with_table(), dir, {consistency_kind::ssp, 2}), 2001, 25), 25);
}

TEST_CASE("the probe's table rows are checked against the schedule, rows the run did not push refused") {
  temp_dir dir;
  auto c = options(probe_with_table(), dir, {consistency_kind::bsp, 0}).base;
  c.training.steps = 20;
  auto j = job::start(c);
  REQUIRE(j);
  auto r = (*j)->wait(std::chrono::minutes(1));
  REQUIRE_MESSAGE(r, describe(r.error()));
  auto err = check_probe(c, *r);
  CHECK_MESSAGE(!err, describe(err));
  // The same run judged as if its batches had touched other rows (fewer a
  // batch; another pool): the dense and sparse values still match, the
  // rows do not.
  for (auto [keys, pool] : {std::pair<uint64_t, uint64_t>{3, 256}, {4, 255}}) {
    probe_config other;
    other.table_keys = keys;
    other.table_pool = pool;
    auto judged = c;
    judged.training_model = *probe_model::make(other);
    CHECK(describe(check_probe(judged, *r)).find("table rows differ") != std::string::npos);
  }
}

TEST_CASE("100 seeded fault plans against BSP probe runs whose shards checkpoint incrementally: exactly once, bit-identical, no hang") {
  // Chains of a base and 3 deltas whatever their sizes, so that the random
  // kills, drops, damaged and failed writes land on deltas and bases alike.
  temp_dir dir;
  auto o = options(probe_with_table(), dir, {consistency_kind::bsp, 0});
  o.base.checkpoints.incremental.full_every = 4;
  o.base.checkpoints.incremental.delta_fraction = 100;
  check_all(run_chaos(o, 20001, 100), 100);
}

TEST_CASE("fault plans against BSP sparse-model runs end bit-identical to the fault-free run") {
  temp_dir dir;
  auto o = options(small_sparse_lr(), dir, {consistency_kind::bsp, 0});
  o.base.training.optimizer.kind = optimizer_kind::adagrad;
  o.base.training.optimizer.lr = 0.05f;
  check_all(run_chaos(o, 3001, 30), 30);
}

TEST_CASE("a fault plan survives its text form and bad plans are refused with the item named") {
  fault_mix mix;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    auto plan = random_fault_plan(seed, mix);
    auto back = parse_fault_plan(to_string(plan));
    REQUIRE_MESSAGE(back, describe(back.error()));
    CHECK(to_string(*back) == to_string(plan));
    CHECK(to_string(random_fault_plan(seed, mix)) == to_string(plan));  // seeded
  }
  for (std::string bad :
       {"explode:shard:0@3", "kill:shard:0", "drop:worker:0>checkpointer@4", "delay:worker:0@4",
        "eio:rename@4", "kill:shard:0@x", "reorder:directory>shard:0@4", "drop:bogus@4",
        "kill:shard:0@ack=0", "kill:shard:0@bogus=3", "drop:worker:0@4+5ms", "kill:worker:0@4x2",
        "drop:shard:1>worker:0@1.5ms"}) {
    auto r = parse_fault_plan(bad);
    REQUIRE_MESSAGE(!r, bad);
    CHECK(describe(r.error()).find("'" + bad + "'") != std::string::npos);
  }
}


TEST_CASE("the nodes family draws node faults against the job's nodes: kill9, cuts with a duration, one stop at most") {
  fault_mix mix;
  REQUIRE(!parse_fault_families("kills,nodes", mix));
  CHECK(mix.node_faults);
  CHECK(mix.kills);
  mix.nodes = 3;
  mix.faults = 8;
  std::map<fault_kind, int> seen;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    auto plan = random_fault_plan(seed, mix);
    int stops = 0;
    for (auto& f : plan) {
      if (!f.is_node_fault())
        continue;
      ++seen[f.kind];
      stops += f.kind == fault_kind::stop;
      CHECK((f.target == "node:0" || f.target == "node:1" || f.target == "node:2"));
      CHECK(f.when == trigger::step);
      if (f.kind == fault_kind::cut)
        CHECK((f.delay_ms >= 200 && f.delay_ms <= 1500));
    }
    CHECK(stops <= 1);
    CHECK(!check_fault_plan(plan, mix.shards, mix.workers, mix.nodes));
    auto back = parse_fault_plan(to_string(plan));
    REQUIRE_MESSAGE(back, describe(back.error()));
    CHECK(to_string(*back) == to_string(plan));
  }
  CHECK(seen[fault_kind::kill9] > 0);
  CHECK(seen[fault_kind::stop] > 0);
  CHECK(seen[fault_kind::cut] > 0);
  // Without nodes (a job in one process) the family draws nothing.
  mix.nodes = 0;
  for (auto& f : random_fault_plan(7, mix)) CHECK(!f.is_node_fault());
  auto unknown = parse_fault_families("kills,planets", mix);
  REQUIRE(unknown);
  CHECK(describe(unknown).find("nodes") != std::string::npos);
}

TEST_CASE("seeded kill storms beyond the restart intensity escalate, naming who gave up") {
  // Invariant 3's other half: a plan that kills faster than the intensity
  // allows must not hang or be silently absorbed. The supervisor above the
  // victim gives up and escalates, naming the child; the level above that
  // either restarts the whole subtree (and the run still ends exactly once)
  // or, at the top, the job fails with the escalation as its error.
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    const char* victims[] = {"shard:0", "shard:1", "shards"};
    std::string victim = victims[rng() % 3];
    std::string how = victim == "shards" ? "kill" : (rng() % 2 ? "exit" : "throw");
    std::string plan;
    auto first = 3 + rng() % 10;
    for (uint64_t k = 0; k < 5; ++k)
      plan += (plan.empty() ? "" : ",") + how + ":" + victim + "@" + std::to_string(first + 2 * k);
    CAPTURE(plan);
    temp_dir dir;
    auto c = options(probe_with_table(), dir, {consistency_kind::bsp, 0}).base;
    c.training.steps = 100;
    c.recovery.max_restarts = 2;
    c.recovery.restart_period = std::chrono::seconds(60);
    c.faults.plan = *parse_fault_plan(plan);
    std::vector<job_event> escalations;
    auto j = job::start(c);
    REQUIRE(j);
    (*j)->on_event([&](const job_event& e) {
      if (e.kind == event_kind::escalate)
        escalations.push_back(e);
    });
    auto r = (*j)->wait(std::chrono::minutes(1));
    bool expected = !escalations.empty() && (victim != "shards" || !r);
    if (!expected && r)
      for (auto& e : r->events)
        if (e.kind != event_kind::progress && e.kind != event_kind::checkpoint &&
            e.kind != event_kind::replay)
          MESSAGE(to_string(e));
    REQUIRE(!escalations.empty());
    auto& first_up = escalations.front().detail;
    CHECK_MESSAGE(first_up.find("child '" + victim + "'") != std::string::npos, first_up);
    if (victim == "shards") {
      // Root is the top: its escalation ends the job.
      REQUIRE(!r);
      CHECK(is(r.error(), errc::escalated));
      CHECK(describe(r.error()).find(victim) != std::string::npos);
    } else {
      // Root restarted the shards supervisor: the run went on and ended.
      REQUIRE_MESSAGE(r, describe(r.error()));
      check_exactly_once(c, *r);
    }
  }
}
