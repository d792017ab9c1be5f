#pragma once
// Large float arrays of shards that went away, kept for the next restore.
// A restarted shard copies its snapshot into memory that the incarnation
// before it had already faulted in, instead of into fresh pages (4 KiB page
// faults cost microseconds each on VMs; a 10 M-parameter shard has about
// 10 000 of them per tensor). Bounded: arrays of at least 1 MiB, at most
// `max_cached_bytes` in all; beyond that they are freed. Thread-safe.

#include <cstddef>
#include <vector>

namespace keel::tensor_recycler {

constexpr size_t max_cached_bytes = size_t{512} << 20;  // as the buffer pool keeps

// An empty vector with capacity for at least `n` floats: a kept one when one
// fits (without wasting more than half of it), else a new one, advised to
// use transparent huge pages.
std::vector<float> take(size_t n);

// Keeps `v`'s memory for a later take (or frees it); `v` is left empty.
void give(std::vector<float>& v);

// Bytes kept now (for tests).
size_t cached_bytes();

}  // namespace keel::tensor_recycler
