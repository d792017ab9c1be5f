#pragma once
// How a shard's periodic checkpoints alternate between full bases and
// incremental deltas (actors/core/snapshot_chain.hpp applies it). A plain
// value of the public API (job_config::checkpoints.incremental).

#include <cstdint>

namespace keel {

struct chain_options {
  // At most this many files in a chain: a full base, then deltas each of
  // what changed since the one before (1: every checkpoint a full base).
  uint32_t full_every = 8;
  // A chain's deltas stay within this fraction of its base's bytes; past it
  // the next checkpoint is a base (a restore reads at most 1 + this times
  // a base's bytes).
  double delta_fraction = 0.5;
};

}  // namespace keel
