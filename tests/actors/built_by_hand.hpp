#pragma once
// Values the job's plain parts take, built by hand for tests that run them
// without a job: a shard's committed part of a checkpoint, and a timeline
// event at a given time.
#include <cstdint>
#include <string>
#include <utility>

#include "actors/core/checkpoint_coordinator.hpp"
#include "actors/core/job_event.hpp"

namespace keel::test {

// Shard `shard`'s part of the checkpoint of `step` (one every 10 steps), in /ckpt.
inline committed_shard part(uint32_t shard, uint64_t step) {
  snapshot_ref ref;
  ref.dir = "/ckpt";
  ref.checkpoint = step / 10;
  ref.step = step;
  ref.entry.shard = shard;
  ref.entry.file = "shard-" + std::to_string(shard) + "-step-" + std::to_string(step);
  return {shard, step, ref};
}

// An event of `kind` at `us` microseconds into the run.
inline job_event at(int64_t us, event_kind kind, std::string actor, std::string detail) {
  auto e = make_job_event(kind, std::move(actor), std::move(detail));
  e.at_us = us;
  e.at_ms = us / 1000;
  return e;
}

}  // namespace keel::test
