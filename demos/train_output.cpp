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
void print_tables(const std::vector<table_stats>& tables, const table_limits& limits) {
  table_stats sum;
  for (auto& t : tables) {
    sum.rows += t.rows;
    sum.bytes += t.bytes;
    sum.parameter_bytes += t.parameter_bytes;
    sum.evictions += t.evictions;
    sum.admissions_refused += t.admissions_refused;
    sum.full_refused += t.full_refused;
  }
  auto mb = [](uint64_t b) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", static_cast<double>(b) / 1e6);
    return std::string(text);
  };
  std::cout << "keel train: " << tables.size() << " embedding tables, " << sum.rows << " rows, "
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

int print_result(const job_config& cfg, const job_result& r, const std::string& program, bool quiet) {
  uint64_t restarts = 0;
  for (auto& [name, n] : r.restarts)
    restarts += n;
  std::cout << "keel train: done in " << r.seconds << " s, " << r.samples_per_second
            << " samples/s, " << restarts << " restarts, " << r.rollbacks << " rollbacks";
  if (r.resumed_at_step > 0)
    std::cout << ", resumed at step " << r.resumed_at_step;
  std::cout << "\nkeel train: test ";
  const char* sep = "";
  auto figure = [&](const std::string& name, double v) {
    std::cout << sep << name << " " << v;
    sep = ", ";
  };
  if (r.quality.accuracy)
    figure("accuracy", *r.quality.accuracy);
  if (r.quality.log_loss)
    figure("log loss", *r.quality.log_loss);
  for (auto& m : r.quality.metrics)
    figure(m.name, m.value);
  std::cout << " over " << r.quality.examples << " examples";
  if (cfg.training_model->evaluates_slices()) {
    std::cout << ", scored in " << r.evaluation_seconds << " s; slices scored in the run:";
    for (auto& [by, n] : r.slices_scored)
      std::cout << " " << (by == "job" ? "coordinator" : by) << " " << n;
  }
  std::cout << "\nkeel train: pushes acked " << r.pushes_acked << ", applied "
            << r.pushes_applied << ", params_sha256 " << r.params_sha256 << "\n";
  if (!r.peak_log_bytes.empty()) {
    std::ostringstream mb;
    mb << std::fixed << std::setprecision(1)
       << static_cast<double>(*std::max_element(r.peak_log_bytes.begin(), r.peak_log_bytes.end())) / 1e6;
    std::cout << "keel train: replay logs held at most " << mb.str() << " MB of pushes (one worker's peak)\n";
  }
  if (!r.tables.empty())
    print_tables(r.tables, cfg.training.tables);
  if (r.faults_injected > 0 || !r.faults_not_injected.empty()) {
    std::cout << program << ": planned faults: " << r.faults_injected << " injected, "
              << r.faults_not_injected.size() << " not\n";
    for (auto& missed : r.faults_not_injected)
      std::cout << "  not injected: " << missed << "\n";
  }
  if (r.checkpoints > 0)
    std::cout << "keel train: " << r.checkpoints << " checkpoints committed; writing them took "
              << r.checkpoint_write_seconds << " s (" << r.checkpoint_write_cpu_seconds
              << " s of CPU), and the checkpoint window held workers back " << r.window_wait_seconds
              << " s in all\n";
  if (!quiet) {
    auto recovered = recoveries(r.events);
    if (!recovered.empty()) {
      std::cout << "keel train: recoveries:\n";
      for (auto& rec : recovered)
        std::cout << "  " << to_string(rec) << "\n";
    }
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
