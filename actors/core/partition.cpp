#include "actors/core/partition.hpp"

#include <algorithm>

namespace keel {

namespace {

key_range slice(uint64_t first, uint64_t count, uint32_t i, uint32_t n) {
  return {first + count * i / n, first + count * (i + 1) / n};
}

}  // namespace

std::vector<shard_keys> partition_keys(uint64_t dense_size, uint64_t sparse_count,
                                       uint32_t num_shards) {
  std::vector<shard_keys> out(num_shards);
  for (uint32_t i = 0; i < num_shards; ++i) {
    out[i].dense = slice(0, dense_size, i, num_shards);
    out[i].sparse = slice(dense_size, sparse_count, i, num_shards);
  }
  return out;
}

uint32_t shard_of(const std::vector<shard_keys>& parts, uint64_t key) {
  auto dense_end = parts.empty() ? 0 : parts.back().dense.end;
  if (key < dense_end) {
    auto it = std::upper_bound(parts.begin(), parts.end(), key,
                               [](uint64_t k, const shard_keys& p) { return k < p.dense.end; });
    return static_cast<uint32_t>(it - parts.begin());
  }
  auto it = std::upper_bound(parts.begin(), parts.end(), key,
                             [](uint64_t k, const shard_keys& p) { return k < p.sparse.end; });
  return static_cast<uint32_t>(std::min<size_t>(it - parts.begin(), parts.size() - 1));
}

}  // namespace keel
