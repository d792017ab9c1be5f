// The stall timeout (recovery_config::stall_timeout): every wait in a run
// ends in a decision. A running job whose workers complete no step for
// that long fails, naming the workers it waits for; a job that moves on
// is never failed by it; and the default is derived from the other bounds.
#include <doctest/doctest.h>

#include "tests/actors/job_fixture.hpp"
#include "tests/actors/model_loop.hpp"

namespace keel::test {

TEST_CASE("a job whose workers complete no step within its stall timeout fails, naming the worker it waits for") {
  temp_dir dir;
  auto cfg = config_for(probe_with_table(), dir, 10);
  cfg.application_loop = true;
  cfg.recovery.stall_timeout = std::chrono::milliseconds(1500);
  auto j = job::start(cfg);
  REQUIRE_MESSAGE(j, describe(j.error()));
  // worker:0's loop runs its first step; worker:1's never asks for one, so
  // under BSP no step after the first can complete.
  auto c = (*j)->client(0);
  REQUIRE(c);
  app_model app(cfg, 0);
  auto at = c->next_step().wait(patience);
  REQUIRE_MESSAGE(at, describe(at.error()));
  auto keys = app.keys_at(*at);
  REQUIRE(keys);
  auto p = c->pull(*at, *keys).wait(patience);
  REQUIRE_MESSAGE(p, describe(p.error()));
  auto g = app.gradient(*c, **p);
  REQUIRE(g);
  (void)c->push(*at, std::move(*g));
  auto r = (*j)->wait(patience);
  REQUIRE_FALSE(r);
  auto why = describe(r.error());
  INFO(why);
  CHECK(is(r.error(), errc::timeout));
  CHECK(why.find("made no progress for 1500 ms") != std::string::npos);
  CHECK(why.find("waits for worker:1") != std::string::npos);
  CHECK(why.find("worker:0") == std::string::npos);
  // The loop's open requests end with the job.
  CHECK_FALSE(c->next_step().wait(patience));
}

TEST_CASE("a job that keeps completing steps runs to its end under a stall timeout shorter than the run") {
  temp_dir dir;
  auto cfg = config_for(probe_with_table(), dir, 400);
  cfg.recovery.stall_timeout = std::chrono::milliseconds(2000);
  auto plan = parse_fault_plan("kill:shard:0@100,kill:worker:1@200");
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  cfg.faults.plan = *plan;
  auto r = run(cfg);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->steps == 400);
  check_exactly_once(cfg, *r);
}

TEST_CASE("the stall timeout is derived from the placement's longest wait, the storage deadline and the request timeout") {
  job_config cfg;
  cfg.recovery.request_timeout = std::chrono::milliseconds(2000);
  cfg.checkpoints.storage_deadline = std::chrono::milliseconds(60000);
  using ms = std::chrono::milliseconds;
  CHECK(stall_timeout_for(cfg, ms(0), false) == ms(80000));
  CHECK(stall_timeout_for(cfg, ms(30000), false) == ms(110000));
  // An application's loop in the job's process sets its own pace: none.
  cfg.application_loop = true;
  CHECK(stall_timeout_for(cfg, ms(0), false) == ms(0));
  // Loops in client processes of a cluster: derived as for keel's workers.
  CHECK(stall_timeout_for(cfg, ms(30000), true) == ms(110000));
  // Set: taken as it is.
  cfg.recovery.stall_timeout = ms(5000);
  CHECK(stall_timeout_for(cfg, ms(30000), true) == ms(5000));
  CHECK(stall_timeout_for(cfg, ms(0), false) == ms(5000));
}

}  // namespace keel::test
