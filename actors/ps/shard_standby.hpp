#pragma once
// A shard's state restored ahead of its move to this node: the pre-copy of
// a live migration (actors/cluster/cluster_membership.cpp). While the shard
// still serves on its old node, the node it moves to restores its newest
// committed chain here (prepare); when the move stops the shard and its
// restart lands here, its start takes that state (take) instead of reading
// the chain again. A checkpoint committed in between extends the chain the
// standby was restored from: only the newer deltas are read and applied.
// What came after the restored checkpoint reaches the new incarnation as
// after any restart (the workers' replay), so the pause training sees is
// the stop, the spawn and the replay, not the restore.
//
// The store keeps `capacity` standbys (moves run one at a time: one is
// enough), each a whole shard in memory until taken or replaced: a move
// that never comes leaves its standby until the next prepare. Thread-safe.

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/core/shard_delta.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/shard_restore.hpp"

namespace keel {

class shard_standby_store {
 public:
  explicit shard_standby_store(size_t capacity = 1) : capacity_(capacity) {}

  // Restores `cfg.restore_from.front()`'s chain from the checkpoint
  // directory (every byte checked, as a restart's restore), on the calling
  // thread, and keeps it for `cfg`'s shard of `cfg`'s run. Returns the bytes
  // of the files read. Errors: invalid_argument (no ref, or a ref of
  // another run), and the restore's own (a damaged file is named).
  caf::expected<uint64_t> prepare(const parameter_shard_config& cfg, const parameter_shard_env& env);

  // The start of `cfg`'s shard from its standby, taken out of the store,
  // when `cfg.restore_from.front()` is the ref it was restored from or a
  // newer one whose chain extends it (the newer files read and applied
  // here); `said` then tells which. Nothing when there is no standby for
  // the shard, the config or the chain differs, or a newer file fails (the
  // standby is dropped in every case: the caller restores as usual).
  std::optional<shard_start> take(const parameter_shard_config& cfg, const parameter_shard_env& env,
                                  std::string& said);

  size_t size() const;
  uint64_t taken() const;  // standbys a start took
  uint64_t bytes() const;  // the kept standbys' file bytes

 private:
  struct standby {
    std::string run_id, config_hash, config;  // config: the shard_config, as text
    uint32_t shard = 0;
    std::vector<chain_link> links;  // the ref's chain and its own file
    chain_state restored;
    uint64_t bytes = 0;
  };
  mutable std::mutex mtx_;
  size_t capacity_;
  uint64_t taken_ = 0;
  std::deque<standby> kept_;  // newest last
};

}  // namespace keel
