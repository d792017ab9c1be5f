#include "train_output.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "actors/core/partition.hpp"
#include "actors/keel.hpp"
#include "messages/errors.hpp"
#include "models/probe_model.hpp"

namespace keel::cli {

namespace {

// The embedding tables' line: rows, memory beside the bytes of values and
// optimizer state, and what capacity and admission dropped.
void print_tables(const job_summary& s, const table_limits& limits) {
  const auto& sum = s.tables_total;
  auto mb = [](uint64_t b) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", static_cast<double>(b) / 1e6);
    return std::string(text);
  };
  std::cout << "keel train: " << s.tables.size() << " embedding tables, " << sum.rows << " rows, "
            << mb(sum.parameter_bytes) << " MB of values and optimizer state held in " << mb(sum.bytes)
            << " MB (" << (sum.parameter_bytes ? static_cast<double>(sum.bytes) / sum.parameter_bytes : 0.0)
            << " bytes a byte); rows evicted " << sum.evictions
            << (limits.capacity_rows > 0 ? std::string(" (") + long_name(limits.eviction) + " first)" : "")
            << ", pushed rows refused by admission "
            << sum.admissions_refused << " and by full tables " << sum.full_refused << "\n";
}

}  // namespace

std::function<void(const job_event&)> event_printer(bool verbose) {
  return [verbose](const job_event& e) {
    bool routine = e.kind == event_kind::start || e.kind == event_kind::retry ||
                   e.kind == event_kind::shutdown || e.kind == event_kind::checkpoint ||
                   (e.kind == event_kind::down && !e.failed);
    if (e.kind == event_kind::progress)
      std::cout << "  " << e.detail << std::endl;
    else if (e.kind == event_kind::checkpoint_failed)  // summarised by the job: a few lines
      std::cerr << "  [" << e.at_ms << " ms] " << to_string(e.kind) << " " << e.actor << ": " << e.detail
                << std::endl;
    else if (verbose || !routine)
      std::cout << "  [" << e.at_ms << " ms] " << to_string(e.kind) << " " << e.actor << ": " << e.detail
                << std::endl;
  };
}

int print_result(const job_config& cfg, const job_result& r, const job_summary& s, const std::string& program,
                 bool quiet) {
  std::cout << "keel train: done in " << s.seconds << " s, " << s.samples_per_second
            << " samples/s, " << s.restarts_total << " restarts, " << s.rollbacks << " rollbacks";
  if (s.resumed_at_step > 0)
    std::cout << ", resumed at step " << s.resumed_at_step;
  std::cout << "\nkeel train: test ";
  const char* sep = "";
  auto figure = [&](const std::string& name, double v) {
    std::cout << sep << name << " " << v;
    sep = ", ";
  };
  if (s.test_accuracy)
    figure("accuracy", *s.test_accuracy);
  if (s.test_log_loss)
    figure("log loss", *s.test_log_loss);
  for (auto& m : s.test_metrics)
    figure(m.name, m.value);
  std::cout << " over " << s.test_examples << " examples";
  if (cfg.training_model->evaluates_slices()) {
    std::cout << ", scored in " << s.evaluation_seconds << " s; slices scored in the run:";
    for (auto& [by, n] : s.slices_scored)
      std::cout << " " << (by == "job" ? "coordinator" : by) << " " << n;
  }
  std::cout << "\nkeel train: pushes acked " << s.pushes_acked << ", applied "
            << s.pushes_applied << ", params_sha256 " << s.params_sha256 << "\n";
  if (s.peak_log_bytes) {
    std::ostringstream mb;
    mb << std::fixed << std::setprecision(1) << static_cast<double>(*s.peak_log_bytes) / 1e6;
    std::cout << "keel train: replay logs held at most " << mb.str() << " MB of pushes (one worker's peak)\n";
  }
  if (!s.tables.empty())
    print_tables(s, cfg.training.tables);
  if (s.faults_injected > 0 || !s.faults_not_injected.empty()) {
    std::cout << program << ": planned faults: " << s.faults_injected << " injected, "
              << s.faults_not_injected.size() << " not\n";
    for (auto& missed : s.faults_not_injected)
      std::cout << "  not injected: " << missed << "\n";
  }
  if (s.checkpoints > 0)
    std::cout << "keel train: " << s.checkpoints << " checkpoints committed; writing them took "
              << s.checkpoint_write_seconds << " s (" << s.checkpoint_write_cpu_seconds
              << " s of CPU), and the checkpoint window held workers back " << s.window_wait_seconds
              << " s in all\n";
  if (!quiet && !s.recoveries.empty()) {
    std::cout << "keel train: recoveries:\n";
    for (auto& rec : s.recoveries)
      std::cout << "  " << to_string(rec) << "\n";
  }
  auto probe = std::dynamic_pointer_cast<const probe_model>(cfg.training_model);
  if (!probe)
    return 0;
  // The count holds under plain SGD at the job's rate only: another rule
  // moves the parameters by other amounts (still once a push).
  bool counts = cfg.training.optimizer.kind == optimizer_kind::sgd;
  for (auto& [name, rule] : cfg.training.rules)
    counts &= rule.kind == optimizer_kind::sgd && rule.lr == cfg.training.optimizer.lr;
  if (!counts) {
    std::cout << "keel train: exactly once: not checked (the probe counts pushes under plain SGD at the job's "
                 "rate, and this run's update rules differ)\n";
    return 0;
  }
  // Every push adds exactly 1.0, so every parameter must equal the pushes
  // its shard acknowledged: none lost, none applied twice. With the
  // application's loops, only if those push the probe's gradient: then the
  // line says so, and the exit status does not depend on it.
  // A worker that left for good mid-step (SSP, ASP) leaves shards that
  // acknowledged different counts: each key is held to its own shard's.
  const auto& by_shard = r.pushes_acked_by_shard;
  const bool uneven = by_shard.size() == cfg.training.shards &&
                      std::any_of(by_shard.begin(), by_shard.end(), [&](uint64_t n) { return n != by_shard[0]; });
  auto parts = partition_keys(cfg.training_model->layout().dense_size(),
                              cfg.training_model->layout().sparse_key_count(), cfg.training.shards);
  auto err = uneven ? probe->check({r.dense, r.sparse}, [&](uint64_t k) { return by_shard[shard_of(parts, k)]; })
                    : probe->check({r.dense, r.sparse}, r.pushes_acked / cfg.training.shards);
  std::string acked = std::to_string(r.pushes_acked / cfg.training.shards);
  if (uneven) {
    acked.clear();
    for (size_t s = 0; s < by_shard.size(); ++s) acked += (s ? " / " : "") + std::to_string(by_shard[s]);
  }
  std::cout << "keel train: exactly once"
            << (cfg.application_loop ? " (if the application's loops pushed the probe's gradient)" : "") << ": "
            << (err ? "VIOLATED: " + describe(err)
                    : "every parameter equals the " + acked + " pushes its shard acknowledged" +
                          (uneven ? " (shard by shard: a worker left mid-step)" : ""))
            << "\n";
  return err && !cfg.application_loop ? 1 : 0;
}

}  // namespace keel::cli
