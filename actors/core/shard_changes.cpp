// shard_core's record of what changed since its last snapshot (shard_core.hpp:
// "Changes since the last clear_changes()"): the dense chunks a push
// updated, the tables' own records, and a delta's size estimate.
#include <algorithm>

#include "actors/core/shard_core.hpp"

namespace keel {

void shard_core::mark_dense(size_t off, size_t n) {
  if (n == 0)
    return;
  if (dense_changed_.size() * 64 < dense_chunks())
    dense_changed_.assign((dense_chunks() + 63) / 64, 0);
  for (uint64_t c = off / dense_chunk_floats; c <= (off + n - 1) / dense_chunk_floats; ++c)
    dense_changed_[c >> 6] |= uint64_t{1} << (c & 63);
}

bool shard_core::changes_complete() const {
  return std::all_of(tables_.begin(), tables_.end(), [](const embedding_table& t) { return t.changes_complete(); });
}

uint64_t shard_core::delta_bytes_estimate() const {
  uint64_t floats_per_key = 1 + (slot1_.empty() ? 0 : 1) + (slot2_.empty() ? 0 : 1);
  uint64_t bytes = sparse_.size() * 20;
  for (uint64_t c = 0; c < dense_chunks(); ++c)
    if (dense_chunk_changed(c))
      bytes += std::min(dense_chunk_floats, dense_.size() - c * dense_chunk_floats) * 4 * floats_per_key;
  for (auto& t : tables_)
    bytes += t.changed_rows() * (12 + uint64_t{t.dim()} * (1 + t.state_slots()) * 4) + t.evicted_keys().size() * 8;
  return bytes;
}

void shard_core::clear_changes() {
  std::fill(dense_changed_.begin(), dense_changed_.end(), 0);
  for (auto& t : tables_) t.clear_changes();
}

}  // namespace keel
