// The metrics registry: job events in, exact exposition lines and JSON out.
#include <doctest/doctest.h>

#include "actors/faults/recovery.hpp"
#include "actors/job/job.hpp"
#include "actors/job/job_summary.hpp"
#include "actors/metrics/metrics.hpp"
#include "json_check.hpp"
#include "scrape.hpp"

using namespace keel;
using namespace keel::test;

namespace {

job_event event(event_kind kind, std::string actor, int64_t at_us = 0) {
  auto e = make_job_event(kind, std::move(actor), "");
  e.at_us = at_us;
  e.at_ms = at_us / 1000;
  return e;
}

job_event kill(const std::string& victim, int64_t at_us) {
  auto e = event(event_kind::fault, victim, at_us);
  e.fault = "kill:" + victim;
  e.killed = true;
  return e;
}

job_event progress(uint64_t step, uint64_t acked, uint64_t applied, double loss) {
  auto e = event(event_kind::progress, "job");
  e.step = step;
  e.pushes_acked = acked;
  e.pushes_applied = applied;
  e.loss = loss;
  e.samples_per_second = 1500;
  return e;
}

std::string text(const metrics_registry& r) {
  return to_prometheus(r.families());
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE(
    "a registry fed restarts, faults, checkpoints and progress renders exactly those numbers") {
  metrics_registry r;
  r.observe(kill("shard:0", 1000));
  r.observe(event(event_kind::restart, "shard:0", 2000));
  r.observe(kill("shard:0", 5000));
  r.observe(event(event_kind::restart, "shard:0", 6000));
  r.observe(event(event_kind::restart, "worker:1", 7000));
  auto drop = event(event_kind::fault, "worker:1");
  drop.fault = "drop:worker:1@55x3";
  drop.how = fault_kind::drop;
  r.observe(drop);
  auto flip = event(event_kind::damage, "ckpt-3.snap");
  flip.fault = "flip:snapshot@99";
  flip.how = fault_kind::flip;
  r.observe(flip);
  r.observe(event(event_kind::checkpoint, "checkpointer"));
  r.observe(event(event_kind::checkpoint, "checkpointer"));
  r.observe(event(event_kind::checkpoint_failed, "checkpointer"));
  r.observe(event(event_kind::rollback, "root"));
  auto replay = event(event_kind::replay, "worker:0");
  replay.count = 12;
  replay.peer = "shard:0";
  r.observe(replay);
  r.observe(event(event_kind::retry, "worker:0"));  // counted nowhere
  r.observe(progress(40, 160, 150, 0.25));
  auto t = text(r);
  CAPTURE(t);
  CHECK(has_line(t, "keel_restarts_total{actor=\"shard:0\"} 2"));
  CHECK(has_line(t, "keel_restarts_total{actor=\"worker:1\"} 1"));
  CHECK(has_line(t, "keel_faults_injected_total{kind=\"kill\"} 2"));
  CHECK(has_line(t, "keel_faults_injected_total{kind=\"drop\"} 1"));
  CHECK(has_line(t, "keel_faults_injected_total{kind=\"flip\"} 1"));
  CHECK(has_line(t, "keel_checkpoints_total 2"));
  CHECK(has_line(t, "keel_checkpoint_failures_total 1"));
  CHECK(has_line(t, "keel_rollbacks_total 1"));
  CHECK(has_line(t, "keel_replayed_pushes_total 12"));
  CHECK(has_line(t, "keel_steps 40"));
  CHECK(has_line(t, "keel_pushes_total 160"));
  CHECK(has_line(t, "keel_pushes_applied_total 150"));
  CHECK(has_line(t, "keel_training_loss 0.25"));
  CHECK(has_line(t, "keel_samples_per_second 1500"));
  CHECK(has_line(t, "keel_test_accuracy NaN"));
  CHECK(has_line(t, "keel_up 1"));
  CHECK(has_line(t, "keel_job_done 0"));
  CHECK(has_line(t, "# TYPE keel_restarts_total counter"));
  CHECK(has_line(t, "# TYPE keel_steps gauge"));
  CHECK(has_line(t, "# TYPE keel_recovery_seconds histogram"));
  CHECK(has_line(t, "# HELP keel_checkpoints_total Checkpoints committed."));
  auto parsed = read_exposition(t);
  CHECK_MESSAGE(parsed.error.empty(), parsed.error);
}

TEST_CASE("every family has one HELP and one TYPE line, before its samples") {
  metrics_registry r;
  r.observe(event(event_kind::restart, "shard:1"));
  auto t = text(r);
  for (auto& f : r.families()) {
    CAPTURE(f.name);
    auto help = t.find("# HELP " + f.name + " ");
    auto type = t.find("# TYPE " + f.name + " ");
    REQUIRE(help != std::string::npos);
    CHECK(t.find("# HELP " + f.name + " ", help + 1) == std::string::npos);
    CHECK(type > help);
    if (!f.samples.empty())
      CHECK(t.find("\n" + f.name, type) != std::string::npos);
  }
  CHECK(read_exposition(t).error.empty());
}

TEST_CASE("label values are escaped: backslash, double quote and newline") {
  CHECK(escape_label_value("plain:0") == "plain:0");
  CHECK(escape_label_value("a\"b") == "a\\\"b");
  CHECK(escape_label_value("a\\b") == "a\\\\b");
  CHECK(escape_label_value("a\nb") == "a\\nb");
  metrics_registry r;
  r.observe(event(event_kind::restart, "odd \"name\"\\with\nnewline"));
  auto t = text(r);
  CAPTURE(t);
  CHECK(has_line(t, R"(keel_restarts_total{actor="odd \"name\"\\with\nnewline"} 1)"));
  CHECK(read_exposition(t).error.empty());
}

TEST_CASE(
    "recovery times fill cumulative histogram buckets, a sum and a count, and one not back is "
    "pending") {
  metrics_registry r;
  r.observe(kill("shard:0", 1000));
  r.observe(event(event_kind::restart, "shard:0", 4000));  // back after 3 ms
  r.observe(kill("worker:1", 10000));
  r.observe(event(event_kind::restart, "worker:1", 210000));  // back after 200 ms
  r.observe(kill("shard:1", 300000));                         // not back yet
  auto t = text(r);
  CAPTURE(t);
  auto e = read_exposition(t);
  REQUIRE(e.error.empty());
  for (double bound : recovery_buckets_seconds()) {
    CAPTURE(bound);
    double expected = (bound >= 0.003 ? 1 : 0) + (bound >= 0.2 ? 1 : 0);
    auto le = format_metric_value(bound);
    CHECK(e.at("keel_recovery_seconds_bucket{le=\"" + le + "\"}") == expected);
  }
  CHECK(has_line(t, "keel_recovery_seconds_bucket{le=\"+Inf\"} 2"));
  CHECK(has_line(t, "keel_recovery_seconds_count 2"));
  CHECK(e.at("keel_recovery_seconds_sum").value() == doctest::Approx(0.203));
  CHECK(has_line(t, "keel_recoveries_pending 1"));
  // Buckets are cumulative and ascend to +Inf.
  CHECK(t.find("le=\"0.001\"") < t.find("le=\"0.005\""));
  CHECK(t.find("le=\"30\"") < t.find("le=\"+Inf\""));
}

TEST_CASE(
    "a node lost and its children restarted elsewhere is one recovery, as recoveries() reads it") {
  // Fault: kill9 of node:1 at 1 ms; seen down at 3 ms running shard:1 and
  // worker:1; both restarted by 9 ms.
  std::vector<job_event> timeline;
  auto fault = kill("node:1", 1000);
  fault.fault = "kill9:node:1";
  fault.how = fault_kind::kill9;
  timeline.push_back(fault);
  auto down = event(event_kind::node_down, "node:1", 3000);
  down.peer = "shard:1,worker:1";
  timeline.push_back(down);
  timeline.push_back(event(event_kind::progress, "job", 4000));
  timeline.push_back(event(event_kind::restart, "shard:1", 6000));
  timeline.push_back(event(event_kind::restart, "worker:1", 9000));
  metrics_registry r;
  for (auto& e : timeline) r.observe(e);
  auto expected = recoveries(timeline);
  REQUIRE(expected.size() == 1);
  REQUIRE(expected[0].served_after_us);
  auto e = read_exposition(text(r));
  REQUIRE(e.error.empty());
  CHECK(e.at("keel_recovery_seconds_count") == 1);
  CHECK(e.at("keel_recovery_seconds_sum").value() ==
        doctest::Approx(static_cast<double>(*expected[0].served_after_us) / 1e6));
  CHECK(e.at("keel_recoveries_pending") == 0);
  CHECK(e.at("keel_faults_injected_total{kind=\"kill9\"}") == 1);
}

TEST_CASE("counters never go back when a rollback sets the workers' steps back") {
  metrics_registry r;
  r.observe(progress(40, 160, 160, 1.0));
  r.observe(event(event_kind::rollback, "root"));
  r.observe(progress(30, 120, 0, 1.0));  // after the rollback; applied not read
  auto t = text(r);
  CHECK(has_line(t, "keel_steps 30"));  // a gauge follows the workers
  CHECK(has_line(t, "keel_pushes_total 160"));
  CHECK(has_line(t, "keel_pushes_applied_total 160"));
}

TEST_CASE(
    "finishing with a job result replaces the observed numbers with the result's and marks the job "
    "done") {
  metrics_registry r;
  r.observe(event(event_kind::restart, "shard:0"));
  r.observe(progress(10, 40, 0, 2.0));
  job_result res;
  res.steps = 20;
  res.pushes_acked = 80;
  res.pushes_applied = 80;
  res.restarts = {{"shard:0", 1}, {"worker:0", 3}};
  res.rollbacks = 2;
  res.checkpoints = 4;
  res.samples_per_second = 640;
  res.quality.accuracy = 0.875;
  res.quality.log_loss = 0.5;
  res.quality.metrics = {{"mse", 0.25}, {"auc", 0.75}};
  res.seconds = 1.5;
  r.finish(summarize(res));
  auto t = text(r);
  CAPTURE(t);
  CHECK(has_line(t, "keel_job_done 1"));
  CHECK(has_line(t, "keel_job_failed 0"));
  CHECK(has_line(t, "keel_steps 20"));
  CHECK(has_line(t, "keel_pushes_total 80"));
  CHECK(has_line(t, "keel_pushes_applied_total 80"));
  CHECK(has_line(t, "keel_restarts_total{actor=\"worker:0\"} 3"));
  CHECK(has_line(t, "keel_rollbacks_total 2"));
  CHECK(has_line(t, "keel_checkpoints_total 4"));
  CHECK(has_line(t, "keel_test_accuracy 0.875"));
  CHECK(has_line(t, "keel_test_log_loss 0.5"));
  CHECK(has_line(t, "keel_test_metric{name=\"mse\"} 0.25"));
  CHECK(has_line(t, "keel_test_metric{name=\"auc\"} 0.75"));
  CHECK(has_line(t, "keel_elapsed_seconds 1.5"));
}

TEST_CASE("a job that ends without a result is done and failed, its numbers as observed") {
  metrics_registry r;
  r.observe(event(event_kind::restart, "shard:0"));
  r.fail();
  auto t = text(r);
  CHECK(has_line(t, "keel_job_done 1"));
  CHECK(has_line(t, "keel_job_failed 1"));
  CHECK(has_line(t, "keel_restarts_total{actor=\"shard:0\"} 1"));
}

TEST_CASE(
    "sample values: integers exactly, fractions that read back the same, NaN and infinities") {
  CHECK(format_metric_value(0) == "0");
  CHECK(format_metric_value(1200) == "1200");
  CHECK(format_metric_value(9007199254740991.0) == "9007199254740991");
  CHECK(format_metric_value(0.1) == "0.1");
  CHECK(std::stod(format_metric_value(1.0 / 3)) == 1.0 / 3);
  CHECK(format_metric_value(-2.5) == "-2.5");
  CHECK(format_metric_value(NAN) == "NaN");
  CHECK(format_metric_value(INFINITY) == "+Inf");
  CHECK(format_metric_value(-INFINITY) == "-Inf");
}

TEST_CASE(
    "a JSON line holds the same families: numbers, objects by label, a histogram, NaN as null") {
  metrics_registry r;
  r.observe(kill("shard:0", 1000));
  r.observe(event(event_kind::restart, "shard:0", 3000));
  r.observe(event(event_kind::restart, "we\"ird\n", 3000));
  r.observe(progress(7, 28, 0, NAN));
  auto line = to_json_line(r.families(), 1234);
  CAPTURE(line);
  CHECK(line.find('\n') == std::string::npos);
  auto j = parse_json(line);
  REQUIRE(j);
  CHECK(j->type == json::kind::object);
  CHECK((*j)["time_ms"].number == 1234);
  CHECK((*j)["keel_steps"].number == 7);
  CHECK((*j)["keel_pushes_total"].number == 28);
  CHECK((*j)["keel_restarts_total"]["shard:0"].number == 1);
  CHECK((*j)["keel_restarts_total"]["we\"ird\n"].number == 1);
  CHECK((*j)["keel_training_loss"].type == json::kind::null);
  auto& h = (*j)["keel_recovery_seconds"];
  CHECK(h["count"].number == 1);
  CHECK(h["sum"].number == doctest::Approx(0.002));
  CHECK(h["buckets"]["+Inf"].number == 1);
  CHECK(h["buckets"]["0.001"].number == 0);
  CHECK(h["buckets"]["0.0025"].number == 1);
  // Every family is there, and nothing else but the time.
  auto families = r.families();
  CHECK(j->object.size() == families.size() + 1);
  for (auto& f : families) CHECK_MESSAGE(j->object.count(f.name), f.name);
}

TEST_CASE("a JSON line writes whole numbers as integers and the others so they read back the same") {
  metrics_registry r;
  r.observe(progress(7, 28, 0, 0.1));
  auto line = to_json_line(r.families(), 1234);
  CAPTURE(line);
  // The text of the value after "NAME":, whatever the spacing.
  auto value_text = [&](const std::string& name) {
    auto at = line.find("\"" + name + "\"");
    REQUIRE(at != std::string::npos);
    at = line.find_first_not_of(" :", line.find(':', at));
    return line.substr(at, line.find_first_of(",}", at) - at);
  };
  CHECK(value_text("keel_steps") == "7");  // not 7.0 or 7e0: a reader sees an integer
  CHECK(value_text("keel_pushes_total") == "28");
  CHECK(value_text("time_ms") == "1234");
  CHECK(std::stod(value_text("keel_training_loss")) == 0.1);
}

TEST_CASE("the test's JSON reader rejects what is not JSON") {
  for (std::string bad : {"", "{", "{\"a\": }", "[1,]", "{\"a\": NaN}", "01", "\"x", "{} x"}) {
    CAPTURE(bad);
    CHECK(!parse_json(bad));
  }
  CHECK(parse_json("{\"a\": [1, -2.5e3, true, null, \"s\\n\"]}"));
}

TEST_CASE("the test's exposition reader rejects what is not exposition") {
  const std::string head = "# HELP m A metric.\n# TYPE m counter\n";
  CHECK(read_exposition(head + "m 1\n").error.empty());
  CHECK(read_exposition(head + "m{a=\"x\\\"y\",b=\"\\n\"} 1.5e3\n").error.empty());
  std::vector<std::string> bad_texts = {
      head + "m{a=\"x\"y\"} 1\n",  // an unescaped quote
      head + "m{a=\"x\\q\"} 1\n",  // an escape the format does not have
      head + "m one\n",
      head + "m 1",  // no final newline
      head + "m{a=x} 1\n",
      head + "m  1\n",
      head + "1m 1\n",
      "m 1\n",  // no HELP, no TYPE
      "# TYPE m counter\n# HELP m A metric.\nm 1\n",
  };
  for (auto& bad : bad_texts) {
    CAPTURE(bad);
    CHECK(!read_exposition(bad).error.empty());
  }
}

TEST_CASE("a cluster's membership changes, moves, releases and where each child runs are metrics") {
  metrics_registry r;
  auto placed = [&](const std::string& child, const std::string& node, bool moved) {
    auto e = event(event_kind::placed, child, 10);
    e.peer = node;
    e.count = moved ? 1 : 0;
    r.observe(e);
  };
  placed("shard:0", "node:0", false);
  placed("worker:0", "node:1", false);
  auto join = event(event_kind::membership, "node:2", 20);
  join.fault = "join:node:2@5";
  join.how = fault_kind::join;
  r.observe(join);
  auto refused = event(event_kind::membership, "node:0", 25);
  refused.fault = "drain:node:0@6";
  refused.how = fault_kind::drain;
  refused.failed = true;  // not carried out: not counted
  r.observe(refused);
  placed("shard:0", "node:2", true);
  r.observe(event(event_kind::released, "node:1", 30));
  // Elastic workers: a worker's join and leave (worker_schedule).
  auto worker_joined = event(event_kind::membership, "worker:2", 31);
  worker_joined.detail = "joined at step 40: 3 workers from then on";
  r.observe(worker_joined);
  auto worker_left = event(event_kind::membership, "worker:0", 32);
  worker_left.detail = "left after step 79: 2 workers from step 80";
  r.observe(worker_left);
  auto t = text(r);
  CHECK(has_line(t, "keel_membership_changes_total{kind=\"worker_join\"} 1"));
  CHECK(has_line(t, "keel_membership_changes_total{kind=\"worker_leave\"} 1"));
  CHECK(has_line(t, "keel_membership_changes_total{kind=\"join\"} 1"));
  CHECK(t.find("keel_membership_changes_total{kind=\"drain\"}") == std::string::npos);
  CHECK(has_line(t, "keel_child_node{child=\"shard:0\"} 2"));
  CHECK(has_line(t, "keel_child_node{child=\"worker:0\"} 1"));
  CHECK(has_line(t, "keel_moves_total 1"));
  CHECK(has_line(t, "keel_nodes_released_total 1"));
}
