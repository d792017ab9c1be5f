// A real job's metrics, scraped with curl while it runs and after: the
// numbers agree with the job's own result.
#include <doctest/doctest.h>

#include "../actors/job_fixture.hpp"
#include "actors/job/job_summary.hpp"
#include "actors/metrics/metrics.hpp"
#include "actors/metrics/metrics_http.hpp"
#include "scrape.hpp"

using namespace keel;
using namespace keel::test;

TEST_CASE(
    "a probe job killed at shard:0 is scraped live and after, and its metrics equal the result") {
  // Fault: kill shard:0 at step 10 of 60 (BSP, 2 shards, 2 workers).
  temp_dir dir;
  auto cfg = config_for(probe(), dir, 60);
  cfg.faults.plan = {kill_at("shard:0", 10)};
  cfg.progress.every = 5;
  cfg.progress.accuracy = true;  // progress reads the shards: applied pushes are live
  metrics_registry reg;
  std::string error;
  auto server = metrics_http_server::start(
      {}, [&reg] { return to_prometheus(reg.families()); }, error);
  REQUIRE_MESSAGE(server, error);
  auto url = "http://127.0.0.1:" + std::to_string(server->port()) + "/metrics";
  auto j = job::start(cfg);
  REQUIRE(j);
  std::optional<exposition> live;  // scraped while the job waits on this scrape
  uint64_t live_applied = 0;
  (*j)->on_event([&](const job_event& e) {
    reg.observe(e);
    if (e.kind == event_kind::progress)
      live_applied = std::max(live_applied, e.pushes_applied);
    if (e.kind == event_kind::restart && e.actor == "shard:0" && !live)
      live = read_exposition(curl(url).body);
  });
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(cfg, *r);
  REQUIRE(r->restarts.count("shard:0"));

  REQUIRE(live);
  CHECK_MESSAGE(live->error.empty(), live->error);
  CHECK(live->at("keel_restarts_total{actor=\"shard:0\"}") == 1);
  CHECK(live->at("keel_faults_injected_total{kind=\"kill\"}") == 1);
  CHECK(live->at("keel_job_done") == 0);
  CHECK(live->at("keel_up") == 1);
  // Progress before the kill at step 10 reported the pushes so far.
  CHECK(live->at("keel_pushes_total").value() >= 10.0 * cfg.training.workers * cfg.training.shards);
  CHECK(live_applied > 0);
  CHECK(live_applied <= r->pushes_applied);

  reg.finish(summarize(*r));
  auto after = read_exposition(curl(url).body);
  CHECK_MESSAGE(after.error.empty(), after.error);
  CHECK(after.at("keel_restarts_total{actor=\"shard:0\"}") ==
        static_cast<double>(r->restarts.at("shard:0")));
  CHECK(after.at("keel_pushes_applied_total") == static_cast<double>(r->pushes_applied));
  CHECK(after.at("keel_pushes_total") == static_cast<double>(r->pushes_acked));
  CHECK(after.at("keel_checkpoints_total") == static_cast<double>(r->checkpoints));
  CHECK(after.at("keel_steps") == static_cast<double>(cfg.training.steps));
  CHECK(after.at("keel_job_done") == 1);
  // The kill's recovery is in the histogram, as recoveries() reads it.
  auto recovered = recoveries(r->events);
  uint64_t back = 0;
  for (auto& rec : recovered) back += rec.served_after_us ? 1 : 0;
  CHECK(back >= 1);
  CHECK(after.at("keel_recovery_seconds_count") == static_cast<double>(back));
  CHECK(after.at("keel_recoveries_pending") == 0);
}
