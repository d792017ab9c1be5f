#pragma once
// A checkpoint_window is what the job controller knows of its checkpoints
// while the job runs: the window the workers run in (checkpoint_coordinator:
// the steps they may start, lost checkpoints), how the checkpoints' storage
// fares (repeated identical failures summarised by a failure_series; write
// failures since the last commit that outlast checkpoint_config::
// storage_deadline fail the job, naming the last good checkpoint; so do lost
// checkpoints while a worker is paused by backpressure, since it waits for a
// commit that, with a snapshot lost, would never come) and the newest
// committed checkpoint. A plain value owned by the controller's thread: it
// decides, the controller records the lines it returns and tells the workers
// when the window moved. Time comes in as arguments.

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/core/checkpoint_coordinator.hpp"
#include "actors/core/failure_series.hpp"

namespace keel {

class checkpoint_window {
 public:
  using clock = std::chrono::steady_clock;

  // What follows a checkpoint's failure or commit: whether the workers'
  // window moved (tell them), and the timeline lines the failure series
  // shows for it (none while a series repeats between its summaries).
  struct outcome {
    bool window_moved = false;
    std::vector<failure_series::line> lines;
  };

  // `every`, `timeout`: checkpoint_coordinator's; `storage_deadline`: how
  // long write failures may go on since the last commit.
  checkpoint_window(uint64_t every, std::chrono::milliseconds timeout,
                    std::chrono::milliseconds storage_deadline);

  // --- The window (checkpoint_coordinator) ---
  bool windowed() const { return window_.windowed(); }
  uint64_t window() const { return window_.window(); }
  uint64_t released() const { return window_.released(); }
  const std::shared_ptr<committed_snapshots>& snapshots() const { return window_.snapshots(); }
  // Every worker has waited at the window for the timeout: the step of the
  // checkpoint now counted as lost (report it through failed()).
  std::optional<uint64_t> watch(uint64_t slowest_step, clock::time_point now) {
    return window_.watch(slowest_step, now);
  }
  // When watch() must be called again at the latest (nullopt: no deadline).
  std::optional<clock::time_point> next_deadline() const { return window_.next_deadline(); }
  void rolled_back(uint64_t step) { window_.rolled_back(step); }
  void start_at(uint64_t step) { window_.start_at(step); }

  // --- Checkpoints as they end ---
  // The checkpoint at `step` failed (`write_failure`: a shard's write, else
  // lost on the way), described by `detail`, `at_ms` into the run: the
  // window moves past it; a write failure, or any failure while a worker is
  // paused, starts the storage deadline if it does not run.
  outcome failed(uint64_t step, const std::string& detail, bool write_failure, int64_t at_ms,
                 clock::time_point now);
  // Checkpoint `checkpoint` committed at `step`: its snapshots are the newest
  // the shards restart from, the deadline is off, a series of failures
  // ends (its total is the line).
  outcome committed(uint64_t checkpoint, uint64_t step, const std::vector<committed_shard>& shards,
                    int64_t at_ms);
  // A run resumed or rolled back to `checkpoint` at `step`: the last good
  // checkpoint a storage failure names.
  void restored(uint64_t checkpoint, uint64_t step) {
    last_good_ = checkpoint;
    last_good_step_ = step;
  }

  // --- Backpressure: workers paused (their events say so) ---
  void paused(const std::string& worker) { paused_.insert(worker); }
  void resumed(const std::string& worker) { paused_.erase(worker); }  // also: a new incarnation
  void clear_paused() { paused_.clear(); }                           // a new tree

  // --- The storage deadline ---
  // When it passes, if it runs.
  std::optional<clock::time_point> storage_deadline() const;
  // Once it has passed at `now`: why the job fails, naming the last failure
  // and the last good checkpoint in `dir` (nullopt: not yet).
  std::optional<std::string> storage_expired(clock::time_point now, const std::string& dir) const;

  uint64_t last_good() const { return last_good_; }
  uint64_t last_good_step() const { return last_good_step_; }

 private:
  checkpoint_coordinator window_;
  std::chrono::milliseconds storage_deadline_;
  failure_series failures_;
  std::optional<clock::time_point> failing_since_;  // first write failure since the last commit
  std::string last_failure_;                        // the newest failure's text
  std::set<std::string> paused_;
  uint64_t last_good_ = 0;  // the newest committed checkpoint (0: none) and its step
  uint64_t last_good_step_ = 0;
};

}  // namespace keel
