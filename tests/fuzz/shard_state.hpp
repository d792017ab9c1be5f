#pragma once
// Whether two shard_cores hold the same state, bit for bit: parameters and
// optimizer slots (compared as bits, so NaNs count as equal to themselves),
// the sparse table, and per worker the seqs received and applied and the
// clock, version and step counters. What the fuzz targets compare a shard
// against after a restore round trip or a duplicate push.

#include "actors/core/shard_core.hpp"

namespace keel::fuzz {

bool same_shard_state(const shard_core& a, const shard_core& b);

}  // namespace keel::fuzz
