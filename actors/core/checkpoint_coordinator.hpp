#pragma once
// A checkpoint_coordinator is the job's policy for checkpoints, kept apart
// from the messaging around it. Shards send their snapshots straight to the
// checkpointer (through the directory); the checkpointer writes and commits
// them and tells the job. The coordinator then decides what follows:
//  - the window: workers may start a step only below `window()`, a bounded
//    lead (two intervals) past the newest checkpoint released, which bounds
//    the workers' replay logs;
//  - the fan-out of a commit: which replay-log prefix each worker may drop
//    (each shard's own snapshot step; under SSP and ASP the shards of one
//    checkpoint may stand at different steps), and the committed snapshots
//    that restarted shards restore from;
//  - lost checkpoints: one that failed, or that never reached the
//    checkpointer while every worker waited at the window for
//    `checkpoints.timeout` (job.hpp), is given up and the window moves past it (the
//    previous checkpoint stays in force). The window then no longer bounds
//    the logs: while checkpoints fail, each worker's own byte bound does
//    (worker_core.hpp, Backpressure), and the checkpointer retries the
//    failed write.
// A plain value owned by the job's controller thread; the committed
// snapshots it shares with the shard specs are guarded by their own mutex.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "storage/checkpoint_files.hpp"
#include "supervision/snapshot.hpp"

namespace keel {

// One shard's part of a committed checkpoint.
struct committed_shard {
  uint32_t shard = 0;
  uint64_t step = 0;  // the shard's snapshot step: its pushes up to here are durable
  snapshot_ref snapshot;  // its file, which a restarted shard reads itself
};

// Where the shards' snapshots of the last committed checkpoints lie,
// newest first (refs, never bytes), shared with the shard specs' snapshot
// source (read on supervisor threads).
class committed_snapshots {
 public:
  explicit committed_snapshots(size_t keep) : keep_(keep) {}
  void add(uint64_t checkpoint, const std::vector<committed_shard>& shards);
  // Newest first, labelled "checkpoint-ID", each a snapshot_ref.
  std::vector<supervision::snapshot> for_shard(uint32_t shard) const;
  void clear();

 private:
  mutable std::mutex mtx_;
  size_t keep_;
  std::deque<std::pair<uint64_t, std::vector<std::optional<snapshot_ref>>>> newest_first_;  // by shard index
};

class checkpoint_coordinator {
 public:
  using clock = std::chrono::steady_clock;

  // `every`: steps between checkpoints (0: none, no window); `timeout`: how
  // long every worker may wait at the window before the awaited checkpoint
  // counts as lost.
  checkpoint_coordinator(uint64_t every, std::chrono::milliseconds timeout);

  bool windowed() const { return every_ > 0; }
  // Steps below this may start.
  uint64_t window() const { return released_ + 2 * every_; }
  // The newest checkpoint step committed, failed or lost.
  uint64_t released() const { return released_; }

  // A checkpoint committed: returns true when the window moved. Its
  // snapshots become the newest the shards restart from.
  bool committed(uint64_t checkpoint, uint64_t step, const std::vector<committed_shard>& shards);
  // A checkpoint at `step` failed or was lost: returns true when the window moved.
  bool given_up(uint64_t step);

  // Called with the slowest worker's step whenever the job looks: when every
  // worker has waited at the window for the timeout, returns the step of the
  // checkpoint now counted as lost (the caller reports it, then given_up()).
  std::optional<uint64_t> watch(uint64_t slowest_step, clock::time_point now);
  // When watch() must be called again at the latest (nullopt: no deadline).
  std::optional<clock::time_point> next_deadline() const;

  // After a rollback to a checkpoint at `step` (0: from scratch): the window
  // restarts there and no snapshot of the old tree is restored from.
  void rolled_back(uint64_t step);

  // Restarts at or before `step` (e.g. a resumed run's checkpoint).
  void start_at(uint64_t step) { released_ = step; }

  const std::shared_ptr<committed_snapshots>& snapshots() const { return snapshots_; }

 private:
  uint64_t every_;
  std::chrono::milliseconds timeout_;
  uint64_t released_ = 0;
  std::optional<clock::time_point> stalled_since_;
  std::shared_ptr<committed_snapshots> snapshots_ = std::make_shared<committed_snapshots>(2);
};

}  // namespace keel
