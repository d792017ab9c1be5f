#pragma once
// The table a fuzzed table delta is applied to (table_delta_target.cpp) and
// the seeds' deltas of it: one deterministic parent per flags byte, so a
// seed made here applies cleanly and mutations of it reach every check.
//
// Flags (byte 0 of an input): bit 0 the harness recomputes the delta's
// trailing CRC32C (so mutations reach the checks behind it); bit 1 the
// table has a capacity (recency ranks, evictions); bit 2 an admission
// filter (a sketch); bit 3 Adam state (two slots) instead of SGD; bit 4
// least-frequently-updated eviction (with bit 1: update counts, format
// version 2).

#include <cstdint>
#include <vector>

#include "actors/core/embedding_table.hpp"

namespace keel::fuzz {

table_config delta_table_config(uint8_t flags);

// The parent: the table of `flags` after a fixed run of pushes.
embedding_table delta_parent(uint8_t flags);

// A valid delta of the parent (more pushes after its mark), with the flags
// byte in front: a seed.
std::vector<unsigned char> delta_seed(uint8_t flags);

}  // namespace keel::fuzz
