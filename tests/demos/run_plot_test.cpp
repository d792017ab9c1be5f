// The picture `keel plot` draws: a real MNIST run through kills, rendered
// and parsed back as XML, has one shaded span per recovery, one marker per
// fault, restart and checkpoint, and one point per progress event; markers
// sit at the step their time interpolates to; a report without progress
// still plots.
#include <algorithm>

#include "../actors/job_fixture.hpp"
#include "run_plot.hpp"
#include "svg_reading.hpp"

using namespace keel;
using namespace keel::cli;
using namespace keel::test;

namespace {

size_t count_events(const run_report& r, event_kind kind) {
  return std::count_if(r.events.begin(), r.events.end(),
                       [&](const job_event& e) { return e.kind == kind; });
}

std::vector<std::string> marker_labels(const pt::ptree& doc, const std::string& cls) {
  std::vector<std::string> out;
  for (auto* m : elements_of_class(doc, cls))
    out.push_back(m->get<std::string>("text", ""));
  return out;
}

}  // namespace

TEST_CASE("the plot of an MNIST run through kills marks every fault, restart, checkpoint and recovery") {
  temp_dir dir;
  model_options mo;
  mo.data_dir = default_data_dir();
  mo.mnist_limits.train = 6000;
  mo.mnist_limits.test = 2000;
  auto m = make_model("mnist-softmax", mo);
  REQUIRE_MESSAGE(m, describe(m.error()));
  auto c = config_for(*m, dir, 2 * 93);  // 2 epochs
  c.training.optimizer.lr = 0.05f;
  c.checkpoints.every = 25;
  c.progress.every = 18;
  c.progress.accuracy = true;
  c.faults.plan = {kill_at("shard:0", 40), kill_at("worker:1", 90), kill_at("shard:1", 140)};
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  auto report = make_report(c, "mnist-softmax", summarize(*r));
  REQUIRE(report.recoveries.size() >= 3);  // the kills', and any rollback's
  REQUIRE(report.progress.size() >= 10);

  auto doc = parse_svg(render_svg(report));
  CHECK(elements_of_class(doc, "recovery").size() == report.recoveries.size());
  size_t kills = std::count_if(report.events.begin(), report.events.end(),
                               [](const job_event& e) { return e.kind == event_kind::fault && e.killed; });
  CHECK(kills == 3);
  CHECK(elements_of_class(doc, "marker fault").size() == kills);
  CHECK(elements_of_class(doc, "marker restart").size() == count_events(report, event_kind::restart));
  CHECK(elements_of_class(doc, "marker checkpoint").size() ==
        count_events(report, event_kind::checkpoint));
  CHECK(elements_of_class(doc, "marker rollback").size() == count_events(report, event_kind::rollback));
  auto faults = marker_labels(doc, "marker fault");
  CHECK(std::count(faults.begin(), faults.end(), "kill shard:0") == 1);
  CHECK(std::count(faults.begin(), faults.end(), "kill worker:1") == 1);

  auto loss = polyline_points(doc, "series loss");
  auto accuracy = polyline_points(doc, "series accuracy");
  CHECK(loss.size() == report.progress.size());
  // A point is scored unless its scoring met a shard or worker down (the
  // progress event then has no accuracy): one plotted point per scored one.
  auto scored = std::count_if(report.progress.begin(), report.progress.end(),
                              [](const progress_point& p) { return p.accuracy.has_value(); });
  CHECK(scored >= 6);
  CHECK(accuracy.size() == static_cast<size_t>(scored));
  for (size_t i = 1; i < loss.size(); ++i)
    CHECK(loss[i].first > loss[i - 1].first);
  // Accuracy rises over the run: the last point is drawn higher (smaller y).
  CHECK(accuracy.back().second < accuracy.front().second);
}

TEST_CASE("markers sit at their own step if they know it, else where their time interpolates to in the progress series, clamped") {
  run_report r;
  r.model = "probe";
  r.steps = 40;
  r.seconds = 0.4;
  r.progress = {{10, 100, 3, 0.5, 1}, {20, 200, 2, 0.6, 1}, {30, 300, 1, 0.7, 1}};
  auto at = [&](event_kind kind, int64_t ms, uint64_t step = 0) {
    auto e = make_job_event(kind, "shard:0", "");
    e.at_ms = ms;
    e.at_us = ms * 1000;
    e.step = step;
    r.events.push_back(e);
  };
  at(event_kind::fault, 150);         // halfway from step 10 to 20
  at(event_kind::fault, 150, 25);     // triggered at step 25: sits there, whatever its time
  at(event_kind::rollback, 50);       // between the start (0 ms, step 0) and step 10
  at(event_kind::checkpoint, 999, 20);  // a checkpoint knows its step
  at(event_kind::restart, 5000);      // after the end: clamped to the last step
  auto doc = parse_svg(render_svg(r));
  auto loss = polyline_points(doc, "series loss");
  REQUIRE(loss.size() == 3);
  double px_per_step = (loss[1].first - loss[0].first) / 10;
  auto x_of = [&](double step) { return loss[0].first + (step - 10) * px_per_step; };
  auto only = [&](const std::string& cls) {
    auto m = elements_of_class(doc, cls);
    REQUIRE(m.size() == 1);
    return marker_x(*m.front());
  };
  auto faults = elements_of_class(doc, "marker fault");
  REQUIRE(faults.size() == 2);
  CHECK(marker_x(*faults[0]) == doctest::Approx(x_of(15)).epsilon(0.002));
  CHECK(marker_x(*faults[1]) == doctest::Approx(x_of(25)).epsilon(0.002));
  CHECK(only("marker rollback") == doctest::Approx(x_of(5)).epsilon(0.002));
  CHECK(only("marker checkpoint") == doctest::Approx(x_of(20)).epsilon(0.002));
  CHECK(only("marker restart") == doctest::Approx(x_of(40)).epsilon(0.002));
}

TEST_CASE("a report without progress points still plots its markers over time, with a note") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 40);
  c.faults.plan = {kill_at("shard:0", 20)};
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  auto report = make_report(c, "probe", summarize(*r));
  REQUIRE(report.progress.empty());
  auto svg = render_svg(report);
  auto doc = parse_svg(svg);
  CHECK(elements_of_class(doc, "marker fault").size() == 1);
  // The kill's recovery, and a rollback's when the shard restarted fresh
  // just before checkpoint 1 committed and a worker had dropped its log.
  REQUIRE(report.recoveries.size() >= 1);
  CHECK(elements_of_class(doc, "recovery").size() == report.recoveries.size());
  CHECK(elements_of_class(doc, "series loss").empty());
  CHECK(svg.find("no progress points in this report") != std::string::npos);
  CHECK(svg.find("milliseconds since the start") != std::string::npos);
}

TEST_CASE("membership changes are marked and labelled: joins, releases, a plan's drain, an operator's drain and move, a worker's join and leave") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 40);
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  auto report = make_report(c, "probe", summarize(*r));
  // Spread over the run, so that every label has room in its lane.
  const auto span = std::max<int64_t>(80, static_cast<int64_t>(report.seconds * 1000));
  auto at = [&](job_event e, int64_t k) {
    e.at_ms = k * span / 8;
    return e;
  };
  auto planned = make_job_event(event_kind::membership, "node:0", "drain:node:0@20: its shards and workers move");
  planned.fault = "drain:node:0@20";
  report.events.push_back(at(make_job_event(event_kind::node_up, "node:3", "joined at 127.0.0.1:4000; 2 moves to balance"), 1));
  report.events.push_back(at(make_job_event(event_kind::node_up, "node:1", "back at 127.0.0.1:4001"), 2));
  report.events.push_back(at(planned, 3));
  report.events.push_back(at(make_job_event(event_kind::membership, "node:2", "drain requested by an operator (keel admin)"), 4));
  report.events.push_back(at(make_job_event(event_kind::membership, "node:1", "move of shard:1 here requested by an operator (keel admin)"), 5));
  report.events.push_back(at(make_job_event(event_kind::membership, "cluster", "moves done: node:1 1 shard"), 6));
  report.events.push_back(at(make_job_event(event_kind::membership, "worker:2", "joined at step 40: 3 workers from then on"), 6));
  report.events.push_back(at(make_job_event(event_kind::released, "node:0", "drained: nothing of the job runs there any more"), 7));
  report.events.push_back(at(make_job_event(event_kind::membership, "worker:0", "left after step 79: 2 workers from step 80"), 7));
  auto doc = parse_svg(render_svg(report));
  auto labels = marker_labels(doc, "marker membership");
  std::string seen;
  for (auto& l : labels) seen += "[" + l + "]";
  CAPTURE(seen);
  // A node back at its address and the loads after the moves are no change.
  CHECK(labels == std::vector<std::string>{"joined node:3", "drain node:0", "drain node:2", "move shard:1 to node:1",
                                           "joined worker:2", "released node:0", "left worker:0"});
}
