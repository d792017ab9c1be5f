#include "actors/metrics/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "actors/core/actor_id.hpp"
#include "actors/core/job_event.hpp"
#include "actors/faults/recovery.hpp"
#include "actors/job/job.hpp"
#include "actors/job/job_summary.hpp"

namespace keel {

namespace {

// Whether recoveries() may need the event: all but the kinds that come in
// volume and never begin or end a recovery.
bool feeds_recoveries(event_kind k) {
  return k != event_kind::progress && k != event_kind::retry && k != event_kind::skipped_step;
}

metric_family scalar(std::string name, metric_type type, std::string help, double value) {
  metric_family f{std::move(name), std::move(help), type, {}};
  f.samples.push_back({{}, "", value});
  return f;
}

metric_family labelled(std::string name, std::string help, const std::string& label,
                       const std::map<std::string, uint64_t>& by) {
  metric_family f{std::move(name), std::move(help), metric_type::counter, {}};
  for (auto& [value, n] : by) f.samples.push_back({{{label, value}}, "", static_cast<double>(n)});
  return f;
}

// keel_recovery_seconds from the recoveries that came back.
metric_family recovery_histogram(const std::vector<recovery>& rs) {
  metric_family f{"keel_recovery_seconds",
                  "Seconds from a fault (a kill, or a rollback a worker asked for) to the victim "
                  "serving again, per recovery that came back.",
                  metric_type::histogram,
                  {}};
  auto& bounds = recovery_buckets_seconds();
  std::vector<uint64_t> le(bounds.size() + 1, 0);
  uint64_t count = 0;
  double sum = 0;
  for (auto& r : rs) {
    if (!r.served_after_us)
      continue;
    double s = static_cast<double>(*r.served_after_us) / 1e6;
    ++count;
    sum += s;
    for (size_t i = 0; i < bounds.size(); ++i)
      if (s <= bounds[i])
        ++le[i];
    ++le.back();
  }
  for (size_t i = 0; i <= bounds.size(); ++i) {
    auto bound = i < bounds.size() ? format_metric_value(bounds[i]) : "+Inf";
    f.samples.push_back({{{"le", bound}}, "_bucket", static_cast<double>(le[i])});
  }
  f.samples.push_back({{}, "_sum", sum});
  f.samples.push_back({{}, "_count", static_cast<double>(count)});
  return f;
}

// A sample value as JSON: integers exactly (as format_metric_value writes
// them, so 7 stays 7, not 7.0), others as the shortest double that reads
// back the same; NaN and the infinities as null (JSON has none).
nlohmann::ordered_json json_number(double v) {
  if (!std::isfinite(v))
    return nullptr;
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0)
    return static_cast<int64_t>(v);
  return v;
}

// A family's JSON value: a number, an object by label value, or a
// histogram's {"count", "sum", "buckets": {le: n}}.
nlohmann::ordered_json json_value(const metric_family& f) {
  if (f.type == metric_type::histogram) {
    nlohmann::ordered_json count = 0, sum = 0, buckets = nlohmann::ordered_json::object();
    for (auto& s : f.samples) {
      if (s.suffix == "_count")
        count = json_number(s.value);
      else if (s.suffix == "_sum")
        sum = json_number(s.value);
      else
        buckets[s.labels.at(0).second] = json_number(s.value);
    }
    return {{"count", count}, {"sum", sum}, {"buckets", buckets}};
  }
  bool by_label = !f.samples.empty() && !f.samples.front().labels.empty();
  if (!by_label && f.samples.size() == 1)
    return json_number(f.samples.front().value);
  auto out = nlohmann::ordered_json::object();
  for (auto& s : f.samples)
    out[s.labels.empty() ? "" : s.labels[0].second] = json_number(s.value);
  return out;
}

const char* type_name(metric_type t) {
  switch (t) {
    case metric_type::counter:
      return "counter";
    case metric_type::gauge:
      return "gauge";
    case metric_type::histogram:
      return "histogram";
  }
  return "untyped";
}

std::string escape_help(const std::string& h) {
  std::string out;
  for (char c : h) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

const std::vector<double>& recovery_buckets_seconds() {
  // A shard restarted from its snapshot serves again within a millisecond or
  // so; a rollback of the whole tree takes up to seconds.
  static const std::vector<double> bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                             0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                             1,      2.5,     5,      10,    30};
  return bounds;
}

struct metrics_registry::state {
  uint64_t steps = 0;
  uint64_t pushes = 0;
  uint64_t pushes_applied = 0;
  std::map<std::string, uint64_t> restarts;  // by actor
  uint64_t rollbacks = 0;
  uint64_t checkpoints = 0;
  uint64_t checkpoint_failures = 0;
  uint64_t series_count = 0;  // the summarised series' count so far (job_storage.cpp)
  std::map<std::string, double> paused_since;  // backpressure: worker -> when its pause began (s)
  double backpressure_seconds = 0;
  uint64_t replayed = 0;
  std::map<std::string, uint64_t> faults;    // by kind, as a plan spells it ("kill", "drop")
  std::map<std::string, uint64_t> membership;  // changes carried out, by kind ("join", "drain", "worker_join", ...)
  std::map<std::string, uint64_t> child_node;  // child -> the node it runs on (a cluster's placed events)
  uint64_t moves = 0;
  uint64_t released = 0;
  std::vector<job_event> recovery_timeline;  // the events recoveries() reads
  double samples_per_second = 0;
  double training_loss = NAN;
  double test_accuracy = NAN;
  double test_log_loss = NAN;
  std::vector<named_metric> test_metrics;  // the model's own named figures, at the end
  std::vector<table_stats> tables;         // the embedding tables, at the end
  double elapsed_seconds = 0;
  bool done = false;
  bool failed = false;
};

metrics_registry::metrics_registry() : s_(std::make_unique<state>()) {}
metrics_registry::~metrics_registry() = default;

void metrics_registry::observe(const job_event& e) {
  std::lock_guard<std::mutex> lock(mtx_);
  auto& s = *s_;
  s.elapsed_seconds = std::max(s.elapsed_seconds, static_cast<double>(e.at_us) / 1e6);
  if (feeds_recoveries(e.kind))
    s.recovery_timeline.push_back(e);
  switch (e.kind) {
    case event_kind::progress:
      s.steps = e.step;
      // Counters never go back: after a rollback the workers' steps do.
      s.pushes = std::max(s.pushes, e.pushes_acked);
      s.pushes_applied = std::max(s.pushes_applied, e.pushes_applied);
      s.samples_per_second = e.samples_per_second;
      s.training_loss = e.loss;
      if (!std::isnan(e.accuracy))
        s.test_accuracy = e.accuracy;
      break;
    case event_kind::restart:
      ++s.restarts[e.actor];
      s.paused_since.erase(e.actor);  // a new incarnation is not paused
      break;
    case event_kind::rollback:
      ++s.rollbacks;
      s.paused_since.clear();  // the workers start again
      break;
    case event_kind::checkpoint:
      ++s.checkpoints;
      break;
    case event_kind::checkpoint_failed:
      // A series' summaries carry its count so far; a lost checkpoint none.
      if (e.count > 1) {
        s.checkpoint_failures += e.count > s.series_count ? e.count - s.series_count : 0;
        s.series_count = e.count;
      } else {
        ++s.checkpoint_failures;
        if (e.count == 1)
          s.series_count = 1;
      }
      break;
    case event_kind::backpressure:
      s.paused_since.emplace(e.actor, static_cast<double>(e.at_us) / 1e6);
      break;
    case event_kind::resumed:
      if (auto it = s.paused_since.find(e.actor); it != s.paused_since.end()) {
        s.backpressure_seconds += static_cast<double>(e.at_us) / 1e6 - it->second;
        s.paused_since.erase(it);
      }
      break;
    case event_kind::replay:
      s.replayed += e.count;
      break;
    case event_kind::membership:
      if (!e.failed && !e.fault.empty())
        ++s.membership[to_string(e.how)];
      else if (e.actor.rfind("worker:", 0) == 0 && e.detail.rfind("joined at step", 0) == 0)
        ++s.membership["worker_join"];  // elastic workers (worker_schedule)
      else if (e.actor.rfind("worker:", 0) == 0 && e.detail.rfind("left after step", 0) == 0)
        ++s.membership["worker_leave"];
      break;
    case event_kind::placed:
      if (auto node = parse_actor_id(e.peer); node && node->is(actor_kind::node))
        s.child_node[e.actor] = node->index;
      s.moves += e.count;
      break;
    case event_kind::released:
      ++s.released;
      break;
    case event_kind::fault:
    case event_kind::damage:
      if (!e.fault.empty())
        ++s.faults[to_string(e.how)];
      break;
    default:
      break;
  }
}

void metrics_registry::finish(const job_summary& r) {
  std::lock_guard<std::mutex> lock(mtx_);
  auto& s = *s_;
  s.steps = r.steps;
  s.pushes = r.pushes_acked;
  s.pushes_applied = r.pushes_applied;
  s.restarts = r.restarts;
  s.rollbacks = r.rollbacks;
  s.checkpoints = r.checkpoints;
  s.samples_per_second = r.samples_per_second;
  s.test_accuracy = r.test_accuracy.value_or(NAN);
  s.test_log_loss = r.test_log_loss.value_or(NAN);
  s.test_metrics = r.test_metrics;
  s.tables = r.tables;
  s.elapsed_seconds = r.seconds;
  s.done = true;
}

void metrics_registry::fail() {
  std::lock_guard<std::mutex> lock(mtx_);
  auto& s = *s_;
  s.done = true;
  s.failed = true;
}

namespace {

// The embedding tables' families (none without tables), by table.
void append_table_families(std::vector<metric_family>& f, const std::vector<table_stats>& tables) {
  if (tables.empty())
    return;
  using t = metric_type;
  auto per_table = [&](const char* name, const char* help, metric_type type, uint64_t table_stats::*field) {
    metric_family m{name, help, type, {}};
    for (auto& table : tables) m.samples.push_back({{{"table", table.name}}, "", static_cast<double>(table.*field)});
    f.push_back(std::move(m));
  };
  per_table("keel_table_rows", "Rows of each embedding table, over all shards, at the end.", t::gauge,
            &table_stats::rows);
  per_table("keel_table_bytes", "Memory the shards hold for each embedding table, at the end.", t::gauge,
            &table_stats::bytes);
  per_table("keel_table_parameter_bytes",
            "Bytes of each embedding table's values and optimizer state (what keel_table_bytes holds).",
            t::gauge, &table_stats::parameter_bytes);
  per_table("keel_table_evictions_total", "Rows evicted to make room (a table capacity), at the end.",
            t::counter, &table_stats::evictions);
  per_table("keel_table_admissions_refused_total",
            "Pushed rows the admission filter dropped (a key not yet pushed often enough), at the end.",
            t::counter, &table_stats::admissions_refused);
  per_table("keel_table_full_refused_total",
            "Pushed rows dropped because a shard's table was full of the push's own rows, at the end.",
            t::counter, &table_stats::full_refused);
}

}  // namespace

std::vector<metric_family> metrics_registry::families() const {
  std::lock_guard<std::mutex> lock(mtx_);
  auto& s = *s_;
  using t = metric_type;
  auto rs = recoveries(s.recovery_timeline);
  auto pending = std::count_if(rs.begin(), rs.end(), [](auto& r) { return !r.served_after_us; });
  auto n = [](uint64_t v) { return static_cast<double>(v); };
  std::vector<metric_family> f;
  f.push_back(scalar("keel_up", t::gauge, "1 while this process serves keel's metrics.", 1));
  f.push_back(scalar("keel_job_done", t::gauge,
                     "1 once the training job has ended (with a result or failed).", s.done));
  f.push_back(
      scalar("keel_job_failed", t::gauge, "1 if the job ended without a result.", s.failed));
  f.push_back(scalar("keel_elapsed_seconds", t::gauge,
                     "Seconds since the job started, as of its latest event.", s.elapsed_seconds));
  f.push_back(scalar("keel_steps", t::gauge,
                     "Global steps the slowest worker has completed (updated by progress events).",
                     n(s.steps)));
  f.push_back(scalar("keel_pushes_total", t::counter,
                     "Pushes the workers sent and had acknowledged (each worker step pushes once "
                     "to every shard); live from progress events, exact at the end.",
                     n(s.pushes)));
  f.push_back(scalar("keel_pushes_applied_total", t::counter,
                     "Pushes the shards applied (their applied seqs summed); live only when "
                     "progress events read the parameters (progress with accuracy), exact at the "
                     "end.",
                     n(s.pushes_applied)));
  f.push_back(labelled("keel_restarts_total", "Restarts of each actor by its supervisor.", "actor",
                       s.restarts));
  f.push_back(scalar("keel_rollbacks_total", t::counter,
                     "Rollbacks of the whole tree to the last valid checkpoint.", n(s.rollbacks)));
  f.push_back(
      scalar("keel_checkpoints_total", t::counter, "Checkpoints committed.", n(s.checkpoints)));
  f.push_back(scalar("keel_checkpoint_failures_total", t::counter,
                     "Checkpoints that failed or were lost (the previous one stays in force).",
                     n(s.checkpoint_failures)));
  f.push_back(scalar("keel_backpressure_workers", t::gauge,
                     "Workers paused now because their replay log is over its bound (waiting for a "
                     "checkpoint to commit).",
                     n(s.paused_since.size())));
  f.push_back(scalar("keel_backpressure_seconds_total", t::counter,
                     "Seconds workers spent paused by backpressure, summed over workers (pauses that "
                     "ended).",
                     s.backpressure_seconds));
  f.push_back(labelled("keel_faults_injected_total",
                       "Faults the job injected (or tried to), by kind as a fault plan spells it.",
                       "kind", s.faults));
  f.push_back(labelled("keel_membership_changes_total",
                       "Membership changes carried out (a plan's join and drain, a worker's join and leave), by kind.", "kind", s.membership));
  {
    metric_family where{"keel_child_node",
                        "The node each shard and worker of a cluster runs on now (its index).", t::gauge, {}};
    for (auto& [child, node] : s.child_node) where.samples.push_back({{{"child", child}}, "", n(node)});
    f.push_back(std::move(where));
  }
  f.push_back(scalar("keel_moves_total", t::counter,
                     "Children a membership change moved to another node (stopped, restarted there).",
                     n(s.moves)));
  f.push_back(scalar("keel_nodes_released_total", t::counter,
                     "Nodes drained and let go: nothing of the job runs there any more.", n(s.released)));
  f.push_back(scalar("keel_replayed_pushes_total", t::counter,
                     "Pushes the workers resent to restarted shards.", n(s.replayed)));
  f.push_back(recovery_histogram(rs));
  f.push_back(scalar("keel_recoveries_pending", t::gauge,
                     "Actors a fault ended that are not serving again yet.",
                     static_cast<double>(pending)));
  f.push_back(scalar("keel_samples_per_second", t::gauge, "Training throughput, all workers.",
                     s.samples_per_second));
  f.push_back(scalar("keel_training_loss", t::gauge,
                     "Mean training loss since the previous progress event (NaN before one).",
                     s.training_loss));
  f.push_back(scalar("keel_test_accuracy", t::gauge,
                     "Held-out accuracy, when progress scores it and at the end (NaN: not scored).",
                     s.test_accuracy));
  f.push_back(scalar("keel_test_log_loss", t::gauge,
                     "Held-out log loss of the final parameters (NaN until the job ends).",
                     s.test_log_loss));
  metric_family named{"keel_test_metric",
                      "Held-out figures the model reports under their own names (mse, auc, ...), "
                      "at the end.",
                      t::gauge,
                      {}};
  for (auto& m : s.test_metrics)
    named.samples.push_back({{{"name", m.name}}, "", m.value});
  f.push_back(std::move(named));
  append_table_families(f, s.tables);
  return f;
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_metric_value(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  if (std::strtod(buf, nullptr) != v)
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string to_prometheus(const std::vector<metric_family>& families) {
  std::string out;
  for (auto& f : families) {
    out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + f.name + " " + type_name(f.type) + "\n";
    for (auto& s : f.samples) {
      out += f.name + s.suffix;
      if (!s.labels.empty()) {
        out += "{";
        for (size_t i = 0; i < s.labels.size(); ++i)
          out += (i ? "," : "") + s.labels[i].first + "=\"" +
                 escape_label_value(s.labels[i].second) + "\"";
        out += "}";
      }
      out += " " + format_metric_value(s.value) + "\n";
    }
  }
  return out;
}

std::string to_json_line(const std::vector<metric_family>& families, int64_t time_ms) {
  nlohmann::ordered_json line = {{"time_ms", time_ms}};
  for (auto& f : families) line[f.name] = json_value(f);
  // Names come from the job (actors, tables): bytes that are not UTF-8 are
  // replaced rather than failing the line.
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace keel
