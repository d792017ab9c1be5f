#include "actors/job/job_summary.hpp"

#include <algorithm>
#include <cmath>

namespace keel {

namespace {

progress_point point_of(const job_event& e) {
  progress_point p;
  p.step = e.step;
  p.at_ms = e.at_ms;
  p.loss = e.loss;
  if (!std::isnan(e.accuracy))
    p.accuracy = e.accuracy;
  p.samples_per_second = e.samples_per_second;
  return p;
}

table_stats total_of(const std::vector<table_stats>& tables) {
  table_stats sum;
  for (auto& t : tables) {
    sum.rows += t.rows;
    sum.bytes += t.bytes;
    sum.parameter_bytes += t.parameter_bytes;
    sum.evictions += t.evictions;
    sum.admissions_refused += t.admissions_refused;
    sum.full_refused += t.full_refused;
  }
  return sum;
}

}  // namespace

job_summary summarize(const job_result& r) {
  job_summary s;
  s.steps = r.steps;
  s.pushes_acked = r.pushes_acked;
  s.pushes_applied = r.pushes_applied;
  s.seconds = r.seconds;
  s.samples_per_second = r.samples_per_second;

  s.restarts = r.restarts;
  for (auto& [actor, n] : r.restarts)
    s.restarts_total += n;
  s.rollbacks = r.rollbacks;
  s.fault_plan = r.fault_plan;
  s.faults_injected = r.faults_injected;
  s.faults_not_injected = r.faults_not_injected;
  s.messages_hit = r.messages_hit;
  s.recoveries = recoveries(r.events);

  s.checkpoints = r.checkpoints;
  s.checkpoint_write_seconds = r.checkpoint_write_seconds;
  s.checkpoint_write_cpu_seconds = r.checkpoint_write_cpu_seconds;
  s.window_wait_seconds = r.window_wait_seconds;
  if (!r.peak_log_bytes.empty())
    s.peak_log_bytes = *std::max_element(r.peak_log_bytes.begin(), r.peak_log_bytes.end());
  s.resumed_at_step = r.resumed_at_step;

  s.test_accuracy = r.quality.accuracy;
  s.test_log_loss = r.quality.log_loss;
  s.test_metrics = r.quality.metrics;
  s.test_examples = r.quality.examples;
  s.evaluation_seconds = r.evaluation_seconds;
  s.slices_scored = r.slices_scored;

  s.params_sha256 = r.params_sha256;
  for (auto& e : r.events) {
    if (e.kind == event_kind::progress)
      s.progress.push_back(point_of(e));
    else
      s.events.push_back(e);
  }
  s.tables = r.tables;
  s.tables_total = total_of(r.tables);
  return s;
}

}  // namespace keel
