#pragma once
// The chaos runner: runs one job per seed, each with a random fault plan
// drawn from that seed (kills of every actor kind, message drops,
// duplicates, delays and reorders on every link, storage write and fsync
// failures, tears and bit flips; at steps, times or message counts), and
// checks keel's promises on every run:
//   1. exactly once: with the probe model every parameter equals the pushes
//      its shard acknowledged (every table row, initial + the pushes that
//      touched it), and every push acknowledged was applied;
//   2. BSP runs end with the params_sha256 of the fault-free run;
//   3. no hang: every run ends within its time bound, without an error;
//   4. storage: no damaged snapshot is used (restores validate every CRC
//      and shape, so a damaged one would break 1 or 2).
// A failing seed's plan text reproduces it: keel train --faults PLAN.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/faults/fault_plan.hpp"
#include "actors/faults/recovery.hpp"  // actor_kind
#include "actors/job/job.hpp"

namespace keel {

struct chaos_options {
  job_config base;                 // model, shards, workers, steps, consistency, ...
  fault_mix mix;                   // what the random plans may contain
  std::chrono::milliseconds run_timeout{60000};
};

struct chaos_run {
  uint64_t seed = 0;
  std::string plan;                // the faults planned
  uint64_t planned = 0;            // how many
  uint64_t faults = 0;             // how many of them took effect
  std::vector<std::string> not_injected;  // the others, each "FAULT: why"
  uint64_t recoveries = 0;         // restarts + rollbacks
  int64_t lost_updates = 0;        // pushes acknowledged but not applied (negative: applied twice)
  bool exactly_once = true;
  bool bit_identical = true;       // BSP only; true otherwise
  bool finished = true;            // no hang, no error
  std::string problem;             // what broke, if anything
  // For each kill: the victim's kind (shard, worker, checkpointer,
  // supervisor, root) and the time from the kill to its restart (for root:
  // to the rolled-back tree's start), in microseconds.
  std::vector<std::pair<std::string, int64_t>> recovery_us;
  double seconds = 0;
  bool ok() const { return exactly_once && bit_identical && finished; }
};

// For a job of the probe model (models/probe_model.hpp; no error for
// another model): every dense and sparse value equals the pushes each shard
// acknowledged, and with the probe's table, each shard's rows are exactly
// those the schedule touched, each at initial + the batches that touched it
// (compared through params_sha256: the rows' digests computed on the
// shards against those of the expected rows, so no rows are gathered).
// The error names the first dense or sparse key that differs, or the table.
caf::error check_probe(const job_config& cfg, const job_result& r);

// Runs seeds [first, first + count), calling `each` after every run. Under
// BSP it first runs the configuration without faults for the reference hash.
std::vector<chaos_run> run_chaos(const chaos_options& opts, uint64_t first, uint64_t count,
                                 const std::function<void(const chaos_run&)>& each = {});

}  // namespace keel
