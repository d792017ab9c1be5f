#include "run_report.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "messages/errors.hpp"

namespace keel::cli {

using json = nlohmann::ordered_json;

namespace {


// A report field that is missing or of the wrong type; `what` names it by
// its path, e.g. "events[3].kind: expected a string, found a number".
struct format_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads the fields of one JSON object, naming each by its path in errors.
class object_reader {
 public:
  object_reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object())
      throw format_error(where() + "expected an object, found " + j_.type_name());
  }

  const json& at(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end())
      throw format_error("field '" + name(key) + "' is missing");
    return *it;
  }
  std::string name(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  std::string text(const char* key) const {
    auto& v = at(key);
    check(v.is_string(), key, "a string", v);
    return v.get<std::string>();
  }
  uint64_t whole(const char* key, uint64_t max = std::numeric_limits<uint64_t>::max()) const {
    auto& v = at(key);
    check(v.is_number_unsigned() && v.get<uint64_t>() <= max, key,
          "a whole number up to " + std::to_string(max), v);
    return v.get<uint64_t>();
  }
  int64_t integer(const char* key) const {
    auto& v = at(key);
    check(v.is_number_integer(), key, "an integer", v);
    return v.get<int64_t>();
  }
  bool flag(const char* key) const {
    auto& v = at(key);
    check(v.is_boolean(), key, "true or false", v);
    return v.get<bool>();
  }
  // A number, or null for "none" (NaN in a double: JSON has no NaN).
  std::optional<double> maybe_real(const char* key) const {
    auto& v = at(key);
    check(v.is_number() || v.is_null(), key, "a number or null", v);
    return v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
  }
  double real(const char* key) const { return maybe_real(key).value_or(NAN); }
  const json& array(const char* key) const {
    auto& v = at(key);
    check(v.is_array(), key, "an array", v);
    return v;
  }

 private:
  std::string where() const { return path_.empty() ? "" : path_ + ": "; }
  void check(bool ok, const char* key, const std::string& expected, const json& v) const {
    if (!ok)
      throw format_error(name(key) + ": expected " + expected + ", found " +
                         (v.is_primitive() ? v.dump() : std::string(v.type_name())));
  }

  const json& j_;
  std::string path_;
};

std::optional<event_kind> event_kind_named(const std::string& name) {
  for (int k = 0; k <= static_cast<int>(last_event_kind); ++k)
    if (name == to_string(static_cast<event_kind>(k)))
      return static_cast<event_kind>(k);
  return std::nullopt;
}

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json event_json(const job_event& e) {
  return {{"at_ms", e.at_ms},         {"at_us", e.at_us},     {"kind", to_string(e.kind)},
          {"actor", e.actor},         {"detail", e.detail},   {"count", e.count},
          {"step", e.step},           {"checkpoint", e.checkpoint}, {"peer", e.peer},
          {"snapshot", e.snapshot},   {"fault", e.fault},     {"killed", e.killed},
          {"failed", e.failed}};
}

job_event event_from(const json& j, const std::string& path) {
  object_reader in(j, path);
  job_event e;
  auto kind = in.text("kind");
  auto k = event_kind_named(kind);
  if (!k)
    throw format_error(in.name("kind") + ": unknown event kind '" + kind + "'");
  e.kind = *k;
  e.at_ms = in.integer("at_ms");
  e.at_us = in.integer("at_us");
  e.actor = in.text("actor");
  e.detail = in.text("detail");
  e.count = in.whole("count");
  e.step = in.whole("step");
  e.checkpoint = in.whole("checkpoint");
  e.peer = in.text("peer");
  e.snapshot = in.text("snapshot");
  e.fault = in.text("fault");
  if (!e.fault.empty()) {  // "kill:shard:0@40": its kind is the first word
    auto how = parse_fault_kind(std::string_view(e.fault).substr(0, e.fault.find(':')));
    if (!how)
      throw format_error(in.name("fault") + ": unknown fault kind in '" + e.fault + "'");
    e.how = *how;
  }
  e.killed = in.flag("killed");
  e.failed = in.flag("failed");
  return e;
}

json progress_json(const progress_point& p) {
  return {{"step", p.step},
          {"at_ms", p.at_ms},
          {"loss", number_or_null(p.loss)},
          {"accuracy", p.accuracy ? json(*p.accuracy) : json(nullptr)},
          {"samples_per_second", number_or_null(p.samples_per_second)}};
}

progress_point progress_from(const json& j, const std::string& path) {
  object_reader in(j, path);
  progress_point p;
  p.step = in.whole("step");
  p.at_ms = in.integer("at_ms");
  p.loss = in.real("loss");
  p.accuracy = in.maybe_real("accuracy");
  p.samples_per_second = in.real("samples_per_second");
  return p;
}

json recovery_json(const recovery& r) {
  return {{"victim", r.victim},
          {"kind", r.kind},
          {"fault", r.fault},
          {"fault_at_us", r.fault_at_us},
          {"served_after_us", r.served_after_us ? json(*r.served_after_us) : json(nullptr)},
          {"restored_from", r.restored_from},
          {"rolled_back", r.rolled_back},
          {"killed", r.killed},
          {"replayed", r.replayed}};
}

recovery recovery_from(const json& j, const std::string& path) {
  object_reader in(j, path);
  recovery r;
  r.victim = in.text("victim");
  r.kind = in.text("kind");
  r.fault = in.text("fault");
  r.fault_at_us = in.integer("fault_at_us");
  auto& served = in.at("served_after_us");
  if (!served.is_null())
    r.served_after_us = in.integer("served_after_us");
  r.restored_from = in.text("restored_from");
  r.rolled_back = in.flag("rolled_back");
  r.killed = in.flag("killed");
  r.replayed = in.whole("replayed");
  return r;
}

json table_json(const table_stats& t) {
  return {{"name", t.name},
          {"dim", t.dim},
          {"rows", t.rows},
          {"evictions", t.evictions},
          {"admissions_refused", t.admissions_refused},
          {"full_refused", t.full_refused},
          {"bytes", t.bytes},
          {"parameter_bytes", t.parameter_bytes}};
}

table_stats table_from(const json& j, const std::string& path) {
  object_reader in(j, path);
  table_stats t;
  t.name = in.text("name");
  t.dim = static_cast<uint32_t>(in.whole("dim", std::numeric_limits<uint32_t>::max()));
  t.rows = in.whole("rows");
  t.evictions = in.whole("evictions");
  t.admissions_refused = in.whole("admissions_refused");
  t.full_refused = in.whole("full_refused");
  t.bytes = in.whole("bytes");
  t.parameter_bytes = in.whole("parameter_bytes");
  return t;
}

template <class T, class F>
std::vector<T> list_from(const object_reader& in, const char* key, F read_one) {
  std::vector<T> out;
  auto& items = in.array(key);
  for (size_t i = 0; i < items.size(); ++i)
    out.push_back(read_one(items[i], in.name(key) + "[" + std::to_string(i) + "]"));
  return out;
}

// nlohmann's messages begin with "[json.exception.parse_error.101] ".
std::string without_exception_tag(const std::string& what) {
  auto end = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? what.substr(end + 2)
                                                                             : what;
}

}  // namespace

run_report make_report(const job_config& cfg, const std::string& model_name, const job_summary& s) {
  run_report out;
  out.model = model_name;
  out.consistency = to_string(cfg.training.rule);
  out.shards = cfg.training.shards;
  out.workers = cfg.training.workers;
  out.seed = cfg.training.seed;
  out.fault_plan = s.fault_plan;
  out.messages_hit = s.messages_hit;
  out.test_accuracy = s.test_accuracy;
  out.test_log_loss = s.test_log_loss.value_or(NAN);
  for (auto& m : s.test_metrics)
    out.test_metrics[m.name] = m.value;
  out.steps = s.steps;
  out.pushes_acked = s.pushes_acked;
  out.pushes_applied = s.pushes_applied;
  out.rollbacks = s.rollbacks;
  out.checkpoints = s.checkpoints;
  out.seconds = s.seconds;
  out.samples_per_second = s.samples_per_second;
  out.params_sha256 = s.params_sha256;
  out.restarts = s.restarts;
  out.progress = s.progress;
  out.events = s.events;
  out.recoveries = s.recoveries;
  out.tables = s.tables;
  return out;
}

// The JSON conversions nlohmann-json finds by argument-dependent lookup.
// from_json throws nlohmann::json::exception naming the field; parse_report
// turns that into an error value.
void to_json(json& j, const run_report& r) {
  json hit = json::object();
  hit["dropped"] = r.messages_hit.dropped;
  hit["duplicated"] = r.messages_hit.duplicated;
  hit["delayed"] = r.messages_hit.delayed;
  hit["reordered"] = r.messages_hit.reordered;
  json progress = json::array(), events = json::array(), recovered = json::array();
  for (auto& p : r.progress)
    progress.push_back(progress_json(p));
  for (auto& e : r.events)
    events.push_back(event_json(e));
  for (auto& rec : r.recoveries)
    recovered.push_back(recovery_json(rec));
  json tables = json::array();
  for (auto& t : r.tables)
    tables.push_back(table_json(t));
  json named = json::object();
  for (auto& [name, v] : r.test_metrics)
    named[name] = number_or_null(v);
  j = {{"model", r.model},
       {"consistency", r.consistency},
       {"shards", r.shards},
       {"workers", r.workers},
       {"seed", r.seed},
       {"fault_plan", r.fault_plan},
       {"messages_hit", hit},
       {"test_accuracy", r.test_accuracy ? json(*r.test_accuracy) : json(nullptr)},
       {"test_log_loss", number_or_null(r.test_log_loss)},
       {"test_metrics", named},
       {"steps", r.steps},
       {"pushes_acked", r.pushes_acked},
       {"pushes_applied", r.pushes_applied},
       {"rollbacks", r.rollbacks},
       {"checkpoints", r.checkpoints},
       {"seconds", r.seconds},
       {"samples_per_second", number_or_null(r.samples_per_second)},
       {"params_sha256", r.params_sha256},
       {"restarts", r.restarts},
       {"progress", progress},
       {"events", events},
       {"recoveries", recovered},
       {"tables", tables}};
}

void from_json(const json& j, run_report& r) {
  object_reader in(j, "");
  r.model = in.text("model");
  r.consistency = in.text("consistency");
  r.shards = static_cast<uint32_t>(in.whole("shards", std::numeric_limits<uint32_t>::max()));
  r.workers = static_cast<uint32_t>(in.whole("workers", std::numeric_limits<uint32_t>::max()));
  r.seed = in.whole("seed");
  r.fault_plan = in.text("fault_plan");
  object_reader hit(in.at("messages_hit"), "messages_hit");
  r.messages_hit.dropped = hit.whole("dropped");
  r.messages_hit.duplicated = hit.whole("duplicated");
  r.messages_hit.delayed = hit.whole("delayed");
  r.messages_hit.reordered = hit.whole("reordered");
  r.test_accuracy = in.maybe_real("test_accuracy");
  r.test_log_loss = in.real("test_log_loss");
  if (j.contains("test_metrics")) {  // reports written before named metrics have none
    auto& named = j.at("test_metrics");
    object_reader figures(named, "test_metrics");
    for (auto& [name, v] : named.items())
      r.test_metrics[name] = figures.real(name.c_str());
  }
  r.steps = in.whole("steps");
  r.pushes_acked = in.whole("pushes_acked");
  r.pushes_applied = in.whole("pushes_applied");
  r.rollbacks = in.whole("rollbacks");
  r.checkpoints = in.whole("checkpoints");
  r.seconds = in.real("seconds");
  r.samples_per_second = in.real("samples_per_second");
  r.params_sha256 = in.text("params_sha256");
  object_reader restarts(in.at("restarts"), "restarts");
  r.restarts.clear();
  for (auto& [name, n] : in.at("restarts").items())
    r.restarts[name] = restarts.whole(name.c_str());
  r.progress = list_from<progress_point>(in, "progress", progress_from);
  r.events = list_from<job_event>(in, "events", event_from);
  r.recoveries = list_from<recovery>(in, "recoveries", recovery_from);
  r.tables.clear();
  if (j.contains("tables"))  // reports written before tables were counted have none
    r.tables = list_from<table_stats>(in, "tables", table_from);
}

std::string report_json(const run_report& r) {
  return json(r).dump(2) + "\n";
}

caf::expected<run_report> parse_report(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text).get<run_report>();
  } catch (const json::parse_error& e) {
    return make_error(errc::invalid_field,
                      origin + ": not a keel report: " + without_exception_tag(e.what()));
  } catch (const format_error& e) {
    return make_error(errc::invalid_field, origin + ": not a keel report: " + e.what());
  } catch (const json::exception& e) {
    return make_error(errc::invalid_field,
                      origin + ": not a keel report: " + without_exception_tag(e.what()));
  }
}

caf::error write_report(const run_report& r, const std::filesystem::path& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << report_json(r);
  f.flush();
  if (!f)
    return make_error(errc::io_error, path.string() + ": cannot write the report");
  return {};
}

caf::error check_report_file(const std::filesystem::path& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);  // stat(2): a FIFO is not opened
  if (ec || st.type() == std::filesystem::file_type::not_found)
    return {};
  if (st.type() != std::filesystem::file_type::regular)
    return make_error(errc::invalid_argument,
                      path.string() + ": not a regular file (a report is the JSON file keel train --report wrote)");
  auto bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > max_report_bytes)
    return make_error(errc::invalid_argument, path.string() + ": " + std::to_string(bytes) +
                                                  " bytes; a report is at most " +
                                                  std::to_string(max_report_bytes >> 20) + " MiB");
  return {};
}

caf::expected<run_report> read_report(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return make_error(errc::not_found, path.string() + ": no such file");
  if (std::filesystem::is_directory(path, ec))
    return make_error(errc::io_error, path.string() + ": is a directory, not a report");
  if (auto err = check_report_file(path))
    return err;
  std::ifstream f(path, std::ios::binary);
  // Bounded even if the file grew since it was checked.
  auto bytes = std::filesystem::file_size(path, ec);
  std::string text(std::min<uint64_t>(ec ? 0 : bytes, max_report_bytes) + 1, '\0');
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (f.bad())
    return make_error(errc::io_error, path.string() + ": cannot read the file");
  text.resize(static_cast<size_t>(f.gcount()));
  for (char buf[4096]; text.size() <= max_report_bytes && f.read(buf, sizeof buf).gcount() > 0;)
    text.append(buf, static_cast<size_t>(f.gcount()));  // it grew since
  if (text.size() > max_report_bytes)
    return make_error(errc::invalid_argument, path.string() + ": larger than " +
                                                  std::to_string(max_report_bytes >> 20) + " MiB");
  return parse_report(text, path.string());
}

}  // namespace keel::cli
