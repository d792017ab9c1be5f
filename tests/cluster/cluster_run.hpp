#pragma once
// What the keel cluster tests share: running the keel binary, and the
// promises every run must keep (exactly once, and under BSP the params_sha256
// of the same run in one process without faults).
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include "keel_output.hpp"
#include "killed_run.hpp"

namespace keel::test {

inline keel_run run_keel(const std::string& arguments) {
  return run_keel_at(KEEL_BINARY, arguments);
}

// "pushes acked A, applied B" -> {A, B}.
inline std::pair<long, long> acked_applied(const std::string& out) {
  return {number_after(out, "pushes acked "), number_after(out, ", applied ")};
}

// The run's promises: it ended well, applied what it acknowledged exactly
// once, and (BSP) reached the fault-free single-process parameters.
inline void check_promises(const keel_run& r, const std::string& reference_sha) {
  REQUIRE_MESSAGE(r.status == 0, r.out);
  auto [acked, applied] = acked_applied(r.out);
  CHECK(acked > 0);
  CHECK_MESSAGE(acked == applied, r.out);
  CHECK_MESSAGE(r.out.find("exactly once: every parameter equals") != std::string::npos, r.out);
  CHECK_MESSAGE(sha_in(r.out) == reference_sha, r.out);
}

// Checks that `plan` (a --faults / --kill plan) was injected, every fault of
// it, and that `node` was then reported lost.
inline void check_injected_then_lost(const keel_run& r, const std::string& plan, const std::string& node) {
  check_every_planned_fault_fired(plan, r.out);
  auto injected = r.out.find("fault " + node + ": " + plan + ": the node's process");
  auto lost = r.out.find("node_down " + node + ": lost");
  REQUIRE_MESSAGE(injected != std::string::npos, r.out);
  CHECK_MESSAGE(lost != std::string::npos, r.out);
  CHECK(injected < lost);
}

inline std::string reference_sha(const std::string& train_flags) {
  auto r = run_keel("train " + train_flags + " --quiet");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  return sha_in(r.out);
}


// Seeds first..last of a chaos tier: `keel cluster --nodes 3 --respawn-nodes
// TRAIN --random-faults SEED --fault-mix MIX --fault-rate 1`, each run
// keeping the promises against TRAIN's single-process run and injecting
// every fault its plan names (a failing seed's plan is in the message:
// rerun it with keel cluster --faults PLAN). Returns what the runs'
// timelines report injected.
inline injected_faults seeded_cluster_chaos(const std::string& train, const std::string& mix, int first, int last) {
  auto sha = reference_sha(train);
  injected_faults all;
  for (int seed = first; seed <= last; ++seed) {
    CAPTURE(seed);
    auto r = run_keel("cluster --nodes 3 --respawn-nodes " + train + " --random-faults " + std::to_string(seed) +
                      " --fault-mix " + mix + " --fault-rate 1");
    check_promises(r, sha);
    check_every_planned_fault_fired(random_plan_in(r.out), r.out);
    all += injected_in(r.out);
  }
  return all;
}

}  // namespace keel::test
