#pragma once
// A worker's replay log: the pushes it sent to each shard that no durable
// snapshot covers yet. When a shard restarts from a snapshot, the worker
// resends what the snapshot lacks (every logged push above the snapshot's
// applied seq, in seq order); when a checkpoint commits, the log drops what
// it covers. Pushes are kept as shared frames, so logging copies no bytes.
// It counts the payload bytes it holds as it goes (bytes() is O(1)) and the
// most it ever held (peak_bytes()), which a worker bounds (worker_core).
// Not thread-safe; one worker owns one log.

#include <cstdint>
#include <map>
#include <vector>

#include "messages/protocol.hpp"

namespace keel {

class replay_log {
 public:
  explicit replay_log(uint32_t num_shards) : logs_(num_shards) {}

  // Records `push` (seq `seq`) as sent to `shard`. Seqs per shard increase.
  void append(uint32_t shard, uint64_t seq, push_msg push);

  // Drops the pushes to `shard` with seq <= `covered`.
  void truncate(uint32_t shard, uint64_t covered);

  // While more than `bound` bytes are held, drops the oldest seq still
  // logged (from every shard's log at once), never one at or above `keep`.
  // Returns the number of pushes dropped.
  size_t drop_oldest(size_t bound, uint64_t keep);

  // The pushes to `shard` with seq > `after`, in seq order.
  std::vector<push_msg> after(uint32_t shard, uint64_t after) const;

  // The lowest seq still logged for `shard`, or 0 when its log is empty.
  uint64_t first_seq(uint32_t shard) const;

  // Pushes and payload bytes held over all shards.
  size_t size() const;
  size_t bytes() const { return bytes_; }
  // The most payload bytes held at once since the log was made.
  size_t peak_bytes() const { return peak_; }

  void clear();

 private:
  static size_t bytes_of(const push_msg& m);

  std::vector<std::map<uint64_t, push_msg>> logs_;
  size_t bytes_ = 0;
  size_t peak_ = 0;
};

}  // namespace keel
