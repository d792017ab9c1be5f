#pragma once
// A run_report is what `keel train --report FILE` writes and `keel plot`
// reads: the job's configuration, its result, the progress series, the
// timeline of events (progress excluded: those are the series) and the
// recoveries paired from it. It is JSON through nlohmann-json; reading
// checks every field's presence and type and fails with one message naming
// the file, the field and what is wrong, never with a partial report.
// Plain values: build one with make_report, or read one back.

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/core/job_event.hpp"
#include "actors/faults/recovery.hpp"
#include "actors/job/job.hpp"
#include "actors/job/job_summary.hpp"

namespace keel::cli {

struct run_report {
  std::string model;
  std::string consistency;          // "bsp", "ssp:3", "asp"
  uint32_t shards = 0;
  uint32_t workers = 0;
  uint64_t seed = 0;
  std::string fault_plan;           // the faults injected, as parse_fault_plan reads them
  keel::message_fault_hits messages_hit;
  std::optional<double> test_accuracy;
  double test_log_loss = 0;                     // NaN: the model reports no log loss
  std::map<std::string, double> test_metrics;  // the model's own named figures (mse, auc, ...)
  uint64_t steps = 0;
  uint64_t pushes_acked = 0;
  uint64_t pushes_applied = 0;
  uint64_t rollbacks = 0;
  uint64_t checkpoints = 0;
  double seconds = 0;
  double samples_per_second = 0;
  std::string params_sha256;
  std::map<std::string, uint64_t> restarts;  // per actor name
  std::vector<progress_point> progress;
  std::vector<job_event> events;    // every event but progress, in time order
  std::vector<recovery> recoveries;
  std::vector<keel::table_stats> tables;  // the model's embedding tables at the end (none: no tables)
};

// The report of a finished job run with `cfg` on the model named
// `model_name`, whose result `s` summarises.
run_report make_report(const job_config& cfg, const std::string& model_name, const job_summary& s);

// The report as indented JSON text, ending in a newline.
std::string report_json(const run_report& r);

// Parses report JSON; the error (invalid_field) names `origin` (a file name
// or "<text>") and the field or syntax problem.
caf::expected<run_report> parse_report(const std::string& text, const std::string& origin);

// Writes `r` to `path` atomically enough for a CLI: the whole text, then a
// check of the stream. Errors (io_error) name the file.
caf::error write_report(const run_report& r, const std::filesystem::path& path);

// The largest report read_report reads (a long run's report is a few MB).
constexpr uint64_t max_report_bytes = uint64_t{64} << 20;

// Why `path` cannot be a report without opening it (so a FIFO never blocks
// and a device is never read): not a regular file, or larger than
// max_report_bytes; an error of code invalid_argument naming the file, or
// none (also when the file does not exist: read_report says not_found).
caf::error check_report_file(const std::filesystem::path& path);

// Reads the report at `path`. Errors: not_found (no such file), io_error,
// invalid_argument (check_report_file), invalid_field (not JSON, or a field
// missing or of the wrong type), each naming the file.
caf::expected<run_report> read_report(const std::filesystem::path& path);

}  // namespace keel::cli
