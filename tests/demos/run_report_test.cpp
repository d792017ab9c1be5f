// The report `keel train --report` writes: built from a real job, written as
// JSON with nlohmann-json and read back unchanged; malformed or missing
// reports give one error naming the file and what is wrong.
#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../actors/job_fixture.hpp"
#include "run_report.hpp"

using namespace keel;
using namespace keel::cli;
using namespace keel::test;

namespace {

run_report probe_report_through_kills(const temp_dir& dir) {
  auto c = config_for(probe(), dir, 40);
  c.progress.every = 5;
  c.faults.plan = {kill_at("shard:0", 10), kill_at("worker:1", 20)};
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  return make_report(c, "probe", summarize(*r));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a report of a run through kills survives the round trip to JSON and back") {
  temp_dir dir;
  auto report = probe_report_through_kills(dir);
  REQUIRE(report.progress.size() == 8);  // every 5 of 40 steps
  // Two kills; a rollback a worker asks for would add a recovery of its own.
  CHECK(std::count_if(report.recoveries.begin(), report.recoveries.end(),
                      [](const recovery& r) { return after_kill(r); }) == 2);
  auto text = report_json(report);
  auto back = parse_report(text, "<round trip>");
  REQUIRE_MESSAGE(back, describe(back.error()));
  CHECK(report_json(*back) == text);
  CHECK(back->model == "probe");
  CHECK(back->shards == 2);
  CHECK(back->steps == 40);
  CHECK(back->params_sha256 == report.params_sha256);
  CHECK(back->restarts == report.restarts);
  // The probe reports its objective under its own name, and no log loss.
  CHECK(std::isnan(back->test_log_loss));
  REQUIRE(back->test_metrics.count("objective") == 1);
  CHECK(back->test_metrics.at("objective") == report.test_metrics.at("objective"));
  CHECK(has(text, "\"test_metrics\""));
  REQUIRE(back->events.size() == report.events.size());
  for (size_t i = 0; i < report.events.size(); ++i) {
    auto& a = report.events[i];
    auto& b = back->events[i];
    CAPTURE(to_string(a));
    CHECK(a.kind == b.kind);
    CHECK(a.at_us == b.at_us);
    CHECK(a.step == b.step);
    CHECK(a.checkpoint == b.checkpoint);
    CHECK(a.fault == b.fault);
    CHECK(a.killed == b.killed);
    CHECK(a.snapshot == b.snapshot);
    CHECK(a.peer == b.peer);
    CHECK(a.count == b.count);
  }
  for (size_t i = 0; i < report.progress.size(); ++i) {
    CHECK(back->progress[i].step == report.progress[i].step);
    CHECK(back->progress[i].loss == report.progress[i].loss);
    CHECK(!back->progress[i].accuracy);  // the probe has no held-out set
  }
  for (size_t i = 0; i < report.recoveries.size(); ++i)
    CHECK(to_string(back->recoveries[i]) == to_string(report.recoveries[i]));
}

TEST_CASE("every event kind survives the round trip, a cluster's node_down, node_up and placed too") {
  temp_dir dir;
  auto report = probe_report_through_kills(dir);
  for (int k = 0; k <= static_cast<int>(last_event_kind); ++k) {
    auto e = make_job_event(static_cast<event_kind>(k), "node:1", "a cluster's event");
    e.peer = "node:2";
    report.events.push_back(e);
  }
  auto back = parse_report(report_json(report), "<round trip>");
  REQUIRE_MESSAGE(back, describe(back.error()));
  REQUIRE(back->events.size() == report.events.size());
  for (size_t i = 0; i < report.events.size(); ++i) {
    CHECK(back->events[i].kind == report.events[i].kind);
    CHECK(back->events[i].peer == report.events[i].peer);
  }
  CHECK(back->events.back().kind == last_event_kind);
}

TEST_CASE("the report's JSON carries the progress series and the typed fields of each event") {
  temp_dir dir;
  auto j = nlohmann::json::parse(report_json(probe_report_through_kills(dir)));
  REQUIRE(j["progress"].size() == 8);
  CHECK(j["progress"][0]["step"] == 5);
  CHECK(j["progress"][0]["accuracy"].is_null());
  CHECK(j["progress"][0]["loss"].is_number());
  CHECK(j["progress"][0]["samples_per_second"].is_number());
  size_t kills = 0, checkpoints = 0;
  for (auto& e : j["events"]) {
    CHECK(e["kind"] != "progress");
    for (auto key : {"at_ms", "kind", "actor", "detail", "count", "step", "checkpoint", "peer",
                     "snapshot", "fault", "killed"})
      CHECK_MESSAGE(e.contains(key), key);
    if (e["kind"] == "fault" && e["killed"] == true)
      ++kills;
    if (e["kind"] == "checkpoint") {
      ++checkpoints;
      CHECK(e["step"].get<uint64_t>() % 10 == 0);
    }
  }
  CHECK(kills == 2);
  CHECK(checkpoints >= 3);
  CHECK(j["recoveries"][0]["victim"] == "shard:0");
  CHECK(j["recoveries"][0]["served_after_us"].is_number());
}

TEST_CASE("a malformed or missing report gives one error naming the file and what is wrong") {
  temp_dir dir;
  run_report sample;
  sample.model = "probe";
  sample.progress.push_back({10, 100, 0.5, std::nullopt, 1000});
  sample.events.push_back(make_job_event(event_kind::fault, "shard:0", "killed"));
  auto good = nlohmann::ordered_json::parse(report_json(sample));
  struct damage {
    std::string what;
    std::function<std::string()> text;
    std::string expected;
  };
  auto edited = [&](std::function<void(nlohmann::ordered_json&)> f) {
    return [good, f] {
      auto j = good;
      f(j);
      return j.dump();
    };
  };
  std::vector<damage> cases = {
    {"empty file", [] { return std::string(); }, "parse error"},
    {"cut short", [&] { return good.dump().substr(0, 40); }, "parse error"},
    {"not an object", [] { return std::string("[1, 2]"); }, "expected an object, found array"},
    {"field missing", edited([](auto& j) { j.erase("model"); }), "field 'model' is missing"},
    {"text for a number", edited([](auto& j) { j["shards"] = "x"; }), "shards: expected a whole number"},
    {"negative count", edited([](auto& j) { j["steps"] = -1; }), "steps: expected a whole number"},
    {"unknown event kind", edited([](auto& j) { j["events"][0]["kind"] = "explode"; }),
     "events[0].kind: unknown event kind 'explode'"},
    {"bad progress loss", edited([](auto& j) { j["progress"][0]["loss"] = "low"; }),
     "progress[0].loss: expected a number or null"},
    {"progress not a list", edited([](auto& j) { j["progress"] = 3; }), "progress: expected an array"},
  };
  for (auto& c : cases) {
    CAPTURE(c.what);
    auto path = dir.path() / "report.json";
    std::ofstream(path, std::ios::trunc) << c.text();
    auto r = read_report(path);
    REQUIRE(!r);
    CHECK(is(r.error(), errc::invalid_field));
    auto message = describe(r.error());
    CAPTURE(message);
    CHECK(has(message, path.string() + ": not a keel report: "));
    CHECK(has(message, c.expected));
    CHECK(!has(message, "\n"));
  }
  auto missing = read_report(dir.path() / "nope.json");
  REQUIRE(!missing);
  CHECK(is(missing.error(), errc::not_found));
  CHECK(has(describe(missing.error()), "nope.json: no such file"));
  auto directory = read_report(dir.path());
  REQUIRE(!directory);
  CHECK(has(describe(directory.error()), "is a directory"));
}
