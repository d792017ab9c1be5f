#pragma once
// A job_summary is what the readers of a finished job show of its
// job_result: the totals and rates, the held-out figures, the progress
// series, the recoveries paired from the timeline and the embedding tables'
// totals, each derived here once and named as users read them. `keel
// train`'s printed result, its JSON report and the metrics registry (its
// HTTP endpoint and file) read this value rather than the job_result, so a
// figure cannot differ between them. A plain value; summarize() is a pure
// function of the result (it copies, never moves, what it keeps).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/job_event.hpp"
#include "actors/faults/recovery.hpp"
#include "actors/job/job.hpp"
#include "models/evaluation.hpp"

namespace keel {

// One progress event: where training stood at `at_ms`.
struct progress_point {
  uint64_t step = 0;
  int64_t at_ms = 0;
  double loss = 0;                  // mean training loss since the previous point (NaN: none)
  std::optional<double> accuracy;   // held-out accuracy, if it was scored
  double samples_per_second = 0;
};

struct job_summary {
  // The work done.
  uint64_t steps = 0;
  uint64_t pushes_acked = 0;
  uint64_t pushes_applied = 0;
  double seconds = 0;             // job_result::seconds
  double samples_per_second = 0;

  // The faults and what they cost.
  std::map<std::string, uint64_t> restarts;  // per actor name
  uint64_t restarts_total = 0;               // summed over actors
  uint64_t rollbacks = 0;
  std::string fault_plan;                    // as parse_fault_plan reads it
  uint64_t faults_injected = 0;
  std::vector<std::string> faults_not_injected;  // "FAULT: why"
  message_fault_hits messages_hit;
  std::vector<recovery> recoveries;          // recoveries() of the timeline

  // The checkpoints and what they cost.
  uint64_t checkpoints = 0;
  double checkpoint_write_seconds = 0;
  double checkpoint_write_cpu_seconds = 0;
  double window_wait_seconds = 0;
  // The most bytes one worker's replay log held at once (none: no worker
  // reported its log).
  std::optional<uint64_t> peak_log_bytes;
  uint64_t resumed_at_step = 0;  // 0: a fresh start

  // The held-out figures of the final parameters.
  std::optional<double> test_accuracy;
  std::optional<double> test_log_loss;
  std::vector<named_metric> test_metrics;  // the model's own (mse, auc, ...), in its order
  uint64_t test_examples = 0;
  double evaluation_seconds = 0;
  std::map<std::string, uint64_t> slices_scored;  // by scorer ("worker:0", ..., "job")

  // The run's record.
  std::string params_sha256;
  std::vector<progress_point> progress;  // the progress events, in time order
  std::vector<job_event> events;         // every other event, in time order
  std::vector<table_stats> tables;       // the embedding tables, in layout order
  table_stats tables_total;              // their counts and bytes summed (name and dim unset)
};

// The summary of `r`.
job_summary summarize(const job_result& r);

}  // namespace keel
