// Elastic workers (issue 21, item 4; actors/core/worker_schedule.hpp):
// workers join and leave a running job at fixed steps, each step's batches
// dealt among that step's workers. A run with the same schedule is the same
// run: through actor kills in one process, and across `keel node`
// processes through kill -9 of a node, it ends with the same parameters,
// every push its workers made applied once.
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "cluster_fixture.hpp"
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

namespace {

// 3 nodes with one worker slot each, one shard and one worker on each:
// node:2 killed with kill -9 at step 100 leaves worker:2 without a slot.
const std::string slotted = "cluster --nodes 3 --worker-slots 1 --node-wait-ms 1000 --model probe --shards 3 "
                            "--steps 300 --checkpoint-every 20";

// The step a "membership worker:W: leaves after step S (no node could run
// it)" line names, plus one: where the worker left (0: no such line).
long left_at(const std::string& out, const std::string& worker) {
  auto lines = lines_with(out, "membership " + worker + ": leaves after step ");
  if (lines.empty())
    return 0;
  return number_after(lines.front(), "leaves after step ") + 1;
}

}  // namespace

TEST_CASE("keel cluster --workers 2:3: a worker no node has a slot for leaves at the newest checkpoint and the job goes on, bit-identical to that leave planned") {
  auto r = run_keel(slotted + " --workers 2:3 --faults kill9:node:2@100");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  auto at = left_at(r.out, "worker:2");
  // It leaves at a checkpoint's step at or before the kill.
  REQUIRE_MESSAGE(at > 0, r.out);
  CHECK(at <= 100);
  CHECK(at % 20 == 0);
  CHECK_MESSAGE(r.out.find("rollback root: worker:2 leaves: no node could run it") != std::string::npos, r.out);
  CHECK_MESSAGE(r.out.find("2 workers from step " + std::to_string(at) + ", at least 2") != std::string::npos, r.out);
  // The run is the one with that leave planned from the start, bit for bit,
  // every push once; worker:2 runs nowhere at the end.
  auto sha = reference_sha("--model probe --shards 3 --workers 3 --steps 300 --checkpoint-every 20 "
                           "--worker-changes leave:worker:2@" + std::to_string(at));
  check_promises(r, sha);
  auto [acked, applied] = acked_applied(r.out);
  CHECK(acked == (at + 300 * 2) * 3);  // worker:2 pushed until it left, the others every step
  CHECK_MESSAGE(lines_with(r.out, "where the children ran last: ").front().find("worker:2@") == std::string::npos,
                r.out);
  // Under ASP, whose checkpoints' shards stand at steps of their own, the
  // worker's pushes past its leave step stay, counted once.
  r = run_keel(slotted + " --workers 2:3 --consistency asp --faults kill9:node:2@100");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  CHECK_MESSAGE(left_at(r.out, "worker:2") > 0, r.out);
  auto [asp_acked, asp_applied] = acked_applied(r.out);
  CHECK_MESSAGE(asp_acked == asp_applied, r.out);
  CHECK_MESSAGE(r.out.find("exactly once: every parameter equals") != std::string::npos, r.out);
}

TEST_CASE("a job that shrank keeps its leave through the coordinator's kill -9 and --resume, bit-identical") {
  auto tmp = make_temp_dir();
  struct removed {
    std::filesystem::path p;
    ~removed() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  } cleanup{tmp};
  auto dir = tmp / "run";
  std::vector<std::string> argv = {KEEL_BINARY};
  std::istringstream words("cluster --nodes 3 --worker-slots 1 --node-wait-ms 1000 --model probe --shards 3 "
                           "--steps 3000 --checkpoint-every 20 --workers 2:3 --faults kill9:node:2@100 --quiet "
                           "--checkpoint-dir " + dir.string());
  for (std::string w; words >> w;)
    argv.push_back(w);
  // Killed once a checkpoint has committed after worker:2 left (its leave
  // is in the directory's worker-changes by then).
  std::set<std::string> before_leave;
  bool left = false;
  kill9_when(
    argv,
    [&] {
      std::error_code ec;
      if (!left) {
        left = std::filesystem::exists(dir / "worker-changes", ec);
        for (auto& e : std::filesystem::directory_iterator(dir, ec))
          if (e.path().extension() == ".manifest")
            before_leave.insert(e.path().filename().string());
        return false;
      }
      for (auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.path().extension() == ".manifest" && !before_leave.count(e.path().filename().string()))
          return true;
      return false;
    },
    "a checkpoint after worker:2's leave in " + dir.string());
  std::ifstream file(dir / "worker-changes");
  std::string changes;
  std::getline(file, changes);
  REQUIRE_MESSAGE(changes.rfind("leave:worker:2@", 0) == 0, changes);
  auto at = std::stol(changes.substr(std::string("leave:worker:2@").size()));
  // Three nodes again (the recorded plan names node:2): worker:2 would find
  // a slot, and must not be started, since it left.
  auto r = run_keel("cluster --nodes 3 --worker-slots 1 --node-wait-ms 1000 --resume " + dir.string());
  auto sha = reference_sha("--model probe --shards 3 --workers 3 --steps 3000 --checkpoint-every 20 "
                           "--worker-changes leave:worker:2@" + std::to_string(at));
  check_promises(r, sha);
  CHECK(number_after(r.out, "rollbacks, resumed at step ") > at);
  CHECK_MESSAGE(lines_with(r.out, "placed worker:2").empty(), r.out);
}

TEST_CASE("keel cluster with fixed workers, or at its minimum, fails naming why a worker no node can run cannot leave") {
  // Fixed: the job fails once the worker has waited --node-wait-ms.
  auto r = run_keel(slotted + " --workers 3 --faults kill9:node:2@100");
  CHECK(r.status != 0);
  CHECK_MESSAGE(r.out.find("worker:2 cannot leave instead: the job's 3 workers are fixed") != std::string::npos, r.out);
  CHECK_MESSAGE(r.out.find("no live node has had a free worker slot") != std::string::npos, r.out);
  // At its minimum: worker:2 leaves (3 -> 2), then worker:1 may not (2 -> 1).
  r = run_keel(slotted + " --workers 2:3 --faults kill9:node:2@100,kill9:node:1@200");
  CHECK(r.status != 0);
  CHECK_MESSAGE(left_at(r.out, "worker:2") > 0, r.out);
  CHECK_MESSAGE(r.out.find("worker:1 cannot leave instead: the job would go on with 1 workers, fewer than its minimum 2") !=
                  std::string::npos,
                r.out);
}

TEST_CASE("--workers MIN:MAX is refused with its reason: in one process, a minimum above the maximum, without checkpoints") {
  auto r = run_keel("train --model probe --workers 2:3 --steps 50");
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.out.find("--workers: '2:3' has a minimum, which is for keel cluster") != std::string::npos, r.out);
  r = run_keel("cluster --nodes 1 --model probe --workers 3:2 --steps 50");
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.out.find("--workers: '3:2' puts the minimum above the maximum") != std::string::npos, r.out);
  r = run_keel("cluster --nodes 1 --model probe --workers 0:2 --steps 50");
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.out.find("--workers: '0' is too small (at least 1)") != std::string::npos, r.out);
  r = run_keel("cluster --nodes 1 --model probe --workers 1:2 --steps 50 --checkpoint-every 0");
  CHECK(r.status != 0);
  CHECK_MESSAGE(r.out.find("a minimum of workers (--workers MIN:MAX) needs checkpoints") != std::string::npos, r.out);
}

TEST_CASE("with worker slots a drain whose workers have no free slot elsewhere is refused, naming the slots, and the run goes on") {
  auto r = run_keel(slotted + " --workers 3 --faults drain:node:0@50");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  CHECK_MESSAGE(r.out.find("not injected: drain:node:0@50: invalid_argument: cannot drain node:0: it runs 1 worker "
                           "and the other live nodes have 0 free worker slots (keel cluster --worker-slots 1") !=
                  std::string::npos,
                r.out);
  CHECK_MESSAGE(r.out.find("released node:0") == std::string::npos, r.out);
}
