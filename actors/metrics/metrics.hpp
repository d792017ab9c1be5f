#pragma once
// A metrics_registry holds the numbers an operator watches while a training
// job runs: steps, pushes, restarts per actor, rollbacks, checkpoints,
// injected faults, recovery times, throughput and loss. It is fed the job's
// events as they happen (`observe`, from job::on_event) and finalised from
// the job's result (`finish`, reading its job_summary), whose numbers then
// replace what the events suggested. Reading it yields metric families with Prometheus names and
// HELP/TYPE lines, rendered as Prometheus text exposition (format 0.0.4) or
// as one JSON line; both are pure functions of the families. Thread-safe:
// one thread may observe while others render; every call is short and
// never blocks on I/O.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace keel {

// actors/core/job_event.hpp and actors/job/job.hpp; declared here so that readers of
// metrics (the HTTP server, an embedding app) need no CAF header.
struct job_event;
struct job_summary;  // actors/job/job_summary.hpp

enum class metric_type { counter, gauge, histogram };

// One line of a family: `suffix` is "" for counters and gauges, "_bucket",
// "_sum" or "_count" for a histogram's parts (buckets carry an "le" label).
struct metric_sample {
  std::vector<std::pair<std::string, std::string>> labels;  // name, value
  std::string suffix;
  double value = 0;
};

struct metric_family {
  std::string name;  // e.g. "keel_restarts_total"
  std::string help;
  metric_type type = metric_type::gauge;
  std::vector<metric_sample> samples;
};

// The upper bounds (seconds) of keel_recovery_seconds' buckets; +Inf follows.
const std::vector<double>& recovery_buckets_seconds();

class metrics_registry {
 public:
  metrics_registry();
  ~metrics_registry();
  metrics_registry(const metrics_registry&) = delete;
  metrics_registry& operator=(const metrics_registry&) = delete;

  // Counts one event of the job's timeline into the metrics.
  void observe(const job_event& e);
  // The job ended with the result `s` summarises: its totals become the
  // metrics' values and keel_job_done becomes 1.
  void finish(const job_summary& s);
  // The job ended without a result (it failed, timed out or was stopped):
  // keel_job_done and keel_job_failed become 1; the rest stays as observed.
  void fail();

  // Every family, in a fixed order, with its current samples.
  std::vector<metric_family> families() const;

 private:
  struct state;  // actors/metrics/metrics.cpp
  mutable std::mutex mtx_;
  std::unique_ptr<state> s_;
};

// Prometheus text exposition (version 0.0.4): per family a HELP and a TYPE
// line, then its samples; label values escaped (\\, \", \n).
std::string to_prometheus(const std::vector<metric_family>& families);

// One line of JSON (no newline) of the same families: {"time_ms": T, NAME:
// value, ...}; a family with one label is an object by label value, a
// histogram {"count", "sum", "buckets": {le: n}}; NaN is null.
std::string to_json_line(const std::vector<metric_family>& families, int64_t time_ms);

// A label value as the exposition format quotes it: \ " and newline escaped.
std::string escape_label_value(const std::string& v);

// A sample value as the exposition format writes it: integers exactly,
// others in the shortest form that reads back the same; NaN, +Inf, -Inf.
std::string format_metric_value(double v);

}  // namespace keel
