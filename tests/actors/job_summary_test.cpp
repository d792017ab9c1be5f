// The summary of a job's result (actors/job/job_summary.hpp) that `keel
// train`'s printed result, its report and the metrics read: each figure
// derived from the result once, on results built by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "actors/job/job_summary.hpp"
#include "built_by_hand.hpp"

using namespace keel;
using keel::test::at;

namespace {

job_event progress(int64_t us, uint64_t step, double loss, double accuracy) {
  auto e = at(us, event_kind::progress, "job", "step " + std::to_string(step));
  e.step = step;
  e.loss = loss;
  e.accuracy = accuracy;
  e.samples_per_second = 100.0 * static_cast<double>(step);
  return e;
}

job_event kill(int64_t us, const std::string& victim) {
  auto e = at(us, event_kind::fault, victim, "killed");
  e.killed = true;
  e.fault = "kill:" + victim;
  return e;
}

table_stats table(std::string name, uint64_t rows, uint64_t bytes) {
  table_stats t;
  t.name = std::move(name);
  t.dim = 4;
  t.rows = rows;
  t.bytes = bytes;
  t.parameter_bytes = rows * 16;
  t.evictions = rows / 2;
  t.admissions_refused = rows / 4;
  t.full_refused = 1;
  return t;
}

}  // namespace

TEST_CASE("a summary totals the restarts over actors and keeps them per actor") {
  job_result r;
  r.restarts = {{"shard:0", 2}, {"worker:1", 3}};
  r.rollbacks = 1;
  auto s = summarize(r);
  CHECK(s.restarts == r.restarts);
  CHECK(s.restarts_total == 5);
  CHECK(s.rollbacks == 1);
  CHECK(summarize(job_result{}).restarts_total == 0);
}

TEST_CASE("a summary splits the timeline into the progress series and the other events, each in order") {
  job_result r;
  r.events = {progress(1'000, 10, 0.5, NAN), at(1'500, event_kind::checkpoint, "checkpointer", "checkpoint 1"),
              progress(2'000, 20, 0.25, 0.75), at(2'500, event_kind::shutdown, "job", "done")};
  auto s = summarize(r);
  REQUIRE(s.progress.size() == 2);
  CHECK(s.progress[0].step == 10);
  CHECK(s.progress[0].at_ms == 1);
  CHECK(s.progress[0].loss == 0.5);
  CHECK_FALSE(s.progress[0].accuracy);  // NaN: not scored
  CHECK(s.progress[0].samples_per_second == 1000.0);
  CHECK(s.progress[1].step == 20);
  CHECK(s.progress[1].accuracy == 0.75);
  REQUIRE(s.events.size() == 2);
  CHECK(s.events[0].kind == event_kind::checkpoint);
  CHECK(s.events[1].kind == event_kind::shutdown);
}

TEST_CASE("a summary's recoveries are the ones recoveries() pairs from the whole timeline") {
  job_result r;
  auto restart = at(1'600, event_kind::restart, "shard:0", "restarted");
  restart.snapshot = "ckpt-3";
  r.events = {progress(500, 5, 1.0, NAN), kill(1'000, "shard:0"), restart, progress(2'000, 10, 0.5, NAN)};
  auto s = summarize(r);
  auto expected = recoveries(r.events);
  REQUIRE(expected.size() == 1);
  REQUIRE(s.recoveries.size() == 1);
  CHECK(s.recoveries[0].victim == expected[0].victim);
  CHECK(s.recoveries[0].served_after_us == expected[0].served_after_us);
  CHECK(s.recoveries[0].restored_from == expected[0].restored_from);
}

TEST_CASE("a summary sums the tables' counts and bytes and keeps each table") {
  job_result r;
  r.tables = {table("users", 100, 4'000), table("items", 40, 2'000)};
  auto s = summarize(r);
  REQUIRE(s.tables.size() == 2);
  CHECK(s.tables[1].name == "items");
  CHECK(s.tables_total.rows == 140);
  CHECK(s.tables_total.bytes == 6'000);
  CHECK(s.tables_total.parameter_bytes == 140 * 16);
  CHECK(s.tables_total.evictions == 50 + 20);
  CHECK(s.tables_total.admissions_refused == 25 + 10);
  CHECK(s.tables_total.full_refused == 2);
}

TEST_CASE("a summary's replay log peak is the largest worker's, and none when no worker reported") {
  job_result r;
  r.peak_log_bytes = {300, 900, 200};
  CHECK(summarize(r).peak_log_bytes == uint64_t{900});
  CHECK_FALSE(summarize(job_result{}).peak_log_bytes);
}

TEST_CASE("a summary carries the held-out figures as the model reported them, absent ones absent") {
  job_result r;
  r.quality.accuracy = 0.875;
  r.quality.metrics = {{"mse", 0.25}, {"auc", 0.75}};
  r.quality.examples = 500;
  auto s = summarize(r);
  CHECK(s.test_accuracy == 0.875);
  CHECK_FALSE(s.test_log_loss);
  REQUIRE(s.test_metrics.size() == 2);
  CHECK(s.test_metrics[0].name == "mse");  // the model's order, not sorted
  CHECK(s.test_metrics[1].value == 0.75);
  CHECK(s.test_examples == 500);
}
