// Elastic workers (issue 21, item 4; actors/core/worker_schedule.hpp):
// workers join and leave a running job at fixed steps, each step's batches
// dealt among that step's workers. A run with the same schedule is the same
// run: through actor kills in one process, and across `keel node`
// processes through kill -9 of a node, it ends with the same parameters,
// every push its workers made applied once.
#include <string>

#include <doctest/doctest.h>

#include "cluster_run.hpp"

using namespace keel::test;

namespace {

// ctr-lr (embedding tables, AdaGrad, the workers' gradients averaged: each
// step's mean over that step's workers) with 3 worker slots: worker 2
// joins at step 40, worker 0 leaves at step 80.
const std::string ctr = "--model ctr-lr --train-limit 40000 --test-limit 4000 --shards 2 --workers 3 --steps 120 "
                        "--checkpoint-every 10";
const std::string changes = " --worker-changes join:worker:2@40,leave:worker:0@80";
// Pushes: (80 + 120 + 80) worker-steps, to each of 2 shards.
constexpr long pushes = 560;

void check_same_run(const keel_run& r, const std::string& sha) {
  REQUIRE_MESSAGE(r.status == 0, r.out);
  auto [acked, applied] = acked_applied(r.out);
  CHECK_MESSAGE(acked == pushes, r.out);
  CHECK_MESSAGE(applied == pushes, r.out);
  CHECK_MESSAGE(sha_in(r.out) == sha, r.out);
  CHECK_MESSAGE(r.out.find("membership worker:2: joined at step 40: 3 workers from then on") != std::string::npos,
                r.out);
  CHECK_MESSAGE(r.out.find("membership worker:0: left after step 79: 2 workers from step 80") != std::string::npos,
                r.out);
}

}  // namespace

TEST_CASE("workers that join and leave at fixed steps replay bit-identically through kills, and across 3 nodes through kill -9 of a node") {
  auto clean = run_keel("train " + ctr + changes);
  REQUIRE_MESSAGE(clean.status == 0, clean.out);
  auto sha = sha_in(clean.out);
  check_same_run(clean, sha);
  // The schedule changes the run: the same flags without it train otherwise.
  CHECK(reference_sha(ctr) != sha);
  // A shard killed after the join, a worker after the leave: the same run.
  check_same_run(run_keel("train " + ctr + changes + " --faults kill:shard:0@60,kill:worker:1@85"), sha);
  // Over 3 nodes, node:1 (a shard and the worker that joined) lost to kill -9.
  auto r = run_keel("cluster --nodes 3 " + ctr + changes + " --faults kill9:node:1@70");
  check_same_run(r, sha);
  check_every_planned_fault_fired("kill9:node:1@70", r.out);
}

TEST_CASE("workers that join and leave apply every push exactly once under ASP and SSP, through kills") {
  for (std::string rule : {"asp", "ssp:2"}) {
    CAPTURE(rule);
    auto r = run_keel("train --model probe --shards 2 --workers 3 --steps 300 --checkpoint-every 20 --consistency " +
                      rule + " --worker-changes join:worker:2@100,leave:worker:0@200 --faults kill:shard:0@150,kill:worker:1@120");
    REQUIRE_MESSAGE(r.status == 0, r.out);
    // The probe checks each parameter against the pushes acknowledged: 700
    // a shard (worker 0: 200 steps, worker 1: 300, worker 2: 200).
    CHECK_MESSAGE(r.out.find("exactly once: every parameter equals the 700 pushes its shard acknowledged") !=
                    std::string::npos,
                  r.out);
  }
}

TEST_CASE("keel train refuses a worker change that names no worker of the job, no step of the run, or leaves a step without workers") {
  auto refused = [](const std::string& plan, const std::string& says) {
    auto r = run_keel("train --model probe --workers 2 --steps 100 --worker-changes " + plan);
    CHECK(r.status == 2);
    CHECK_MESSAGE(r.out.find("keel train: --worker-changes: " + says) != std::string::npos, r.out);
    CHECK_MESSAGE(r.out.find("params_sha256") == std::string::npos, r.out);
  };
  refused("join:worker:5@50", "worker change 'join:worker:5@50': the job has workers 0 to 1");
  refused("leave:worker:0@100", "worker change 'leave:worker:0@100': the step must be between 1 and 99");
  refused("leave:worker:0@50,leave:worker:1@60", "no worker is active at step 60");
  refused("drop:worker:0@5", "worker change 'drop:worker:0@5': expected join:worker:W@STEP, leave:worker:W@STEP or reserve:worker:W");
}
