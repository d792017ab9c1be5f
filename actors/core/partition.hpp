#pragma once
// How a model's parameters are split across shards. keel uses one global
// key space on the wire: dense keys [0, D) and sparse key k as D + k, so a
// push's dense ranges and sparse keys never collide. Shard i owns the i-th
// of n near-equal contiguous slices of each space (the sparse models shuffle
// feature ids, so contiguous slices balance). Pure functions of (D, S, n).

#include <cstdint>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace keel {

// The keys [begin, end) of one space that one shard owns.
struct key_range {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  bool contains(uint64_t k) const { return k >= begin && k < end; }
  bool contains(uint64_t b, uint64_t e) const { return b >= begin && e <= end && b < e; }
};

struct shard_keys {
  key_range dense;   // global keys
  key_range sparse;  // global keys (D + sparse key)
};

// inspect: both cross processes in spawn configs; the field order is the
// wire format.
template <class I>
typename I::result_type inspect(I& f, key_range& x) {
  return f(caf::meta::type_name("keel.key_range"), x.begin, x.end);
}
template <class I>
typename I::result_type inspect(I& f, shard_keys& x) {
  return f(caf::meta::type_name("keel.shard_keys"), x.dense, x.sparse);
}

// The keys of each of `num_shards` shards for D dense and S sparse keys.
std::vector<shard_keys> partition_keys(uint64_t dense_size, uint64_t sparse_count,
                                       uint32_t num_shards);

// The shard that owns global key `key`.
uint32_t shard_of(const std::vector<shard_keys>& parts, uint64_t key);

}  // namespace keel
