// Workers changed while the job runs (job::change_workers, issue 21 item 4):
// a worker held in reserve joins and a worker leaves at the step the job
// picks, the checkpoint window's edge. The run must be the run those
// changes planned from the start would have been, bit for bit, every push
// applied once; and a resume after the change keeps it.
#include <condition_variable>
#include <mutex>

#include <doctest/doctest.h>

#include "models/probe_model.hpp"
#include "tests/actors/job_fixture.hpp"

namespace keel::test {
namespace {

constexpr uint64_t steps = 2000;

job_config reserve_config(const temp_dir& dir) {
  auto cfg = config_for(probe_with_table(), dir, steps);
  cfg.training.workers = 3;
  auto s = worker_schedule::parse("reserve:worker:2", 3, steps);
  REQUIRE_MESSAGE(s, describe(s.error()));
  cfg.training.schedule = *s;
  return cfg;
}

// The same run with the changes planned: worker 2 joins at `join`, worker 0 leaves at `leave`.
job_config planned_config(const temp_dir& dir, uint64_t join, uint64_t leave) {
  auto cfg = config_for(probe_with_table(), dir, steps);
  cfg.training.workers = 3;
  auto s = worker_schedule::parse("join:worker:2@" + std::to_string(join) + ",leave:worker:0@" + std::to_string(leave),
                                  3, steps);
  REQUIRE_MESSAGE(s, describe(s.error()));
  cfg.training.schedule = *s;
  return cfg;
}

// Every push the planned schedule makes applied once: the probe's dense and
// sparse values count them (its table rows are compared through
// params_sha256 with the planned run's).
void check_counts(const job_config& planned, const job_result& r) {
  auto pushes = planned.training.schedule.worker_steps(steps) * planned.training.shards;
  CHECK(r.pushes_acked == pushes);
  CHECK(r.pushes_applied == pushes);
  auto probe = std::dynamic_pointer_cast<const probe_model>(planned.training_model);
  REQUIRE(probe);
  auto err = probe->check({r.dense, r.sparse}, pushes / planned.training.shards);
  CHECK_MESSAGE(!err, describe(err));
}

// Worker 2 joins, then worker 0 leaves, each as soon as the job takes it.
std::pair<uint64_t, uint64_t> change(job& j) {
  auto join = j.change_workers("join:worker:2");
  REQUIRE_MESSAGE(join, describe(join.error()));
  auto leave = j.change_workers("leave:worker:0");
  REQUIRE_MESSAGE(leave, describe(leave.error()));
  CHECK(*leave >= *join);
  return {*join, *leave};
}

}  // namespace

TEST_CASE("a worker held in reserve joins and a worker leaves at runtime: the run is the one that planned them, bit for bit") {
  temp_dir dir, planned_dir;
  auto j = job::start(reserve_config(dir));
  REQUIRE_MESSAGE(j, describe(j.error()));
  auto [join, leave] = change(**j);
  INFO("joined at " << join << ", left at " << leave);
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  auto planned = planned_config(planned_dir, join, leave);
  CHECK(r->worker_changes == planned.training.schedule.to_string());
  check_counts(planned, *r);
  auto clean = run(planned);
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(r->params_sha256 == clean->params_sha256);
  bool joined = false, left = false;
  for (auto& e : r->events) {
    joined |= e.kind == event_kind::membership && e.actor == "worker:2" &&
              e.detail.find("joins at step " + std::to_string(join)) != std::string::npos;
    left |= e.kind == event_kind::membership && e.actor == "worker:0" &&
            e.detail.find("leaves after step " + std::to_string(leave - 1)) != std::string::npos;
  }
  CHECK(joined);
  CHECK(left);
}

TEST_CASE("workers changed at runtime stay changed through a stop and a resume, bit-identical to the planned run") {
  temp_dir dir, planned_dir;
  auto cfg = reserve_config(dir);
  uint64_t join = 0, leave = 0;
  {
    auto j = job::start(cfg);
    REQUIRE_MESSAGE(j, describe(j.error()));
    // Stopped once a checkpoint past both changes has committed: the resume
    // restores it, with the changed schedule from the directory.
    std::mutex m;
    std::condition_variable cv;
    uint64_t committed = 0;
    (*j)->on_event([&](const job_event& e) {
      if (e.kind != event_kind::checkpoint)
        return;
      std::lock_guard<std::mutex> guard(m);
      committed = std::max(committed, e.step);
      cv.notify_all();
    });
    std::tie(join, leave) = change(**j);
    {
      std::unique_lock<std::mutex> lock(m);
      REQUIRE(cv.wait_for(lock, std::chrono::minutes(1), [&] { return committed > leave; }));
    }
    REQUIRE(!(*j)->stop());
  }
  cfg.checkpoints.resume = true;
  auto r = run(cfg);
  REQUIRE_MESSAGE(r, describe(r.error()));
  auto planned = planned_config(planned_dir, join, leave);
  CHECK(r->worker_changes == planned.training.schedule.to_string());
  auto clean = run(planned);
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(r->params_sha256 == clean->params_sha256);
}

TEST_CASE("a change of workers at runtime that cannot be is refused, naming why, and the run goes on") {
  temp_dir dir;
  auto j = job::start(reserve_config(dir));
  REQUIRE_MESSAGE(j, describe(j.error()));
  auto refused = [&](const std::string& items, const std::string& why) {
    auto at = (*j)->change_workers(items);
    REQUIRE(!at);
    CHECK_MESSAGE(describe(at.error()).find(why) != std::string::npos, describe(at.error()));
  };
  refused("join:worker:1", "worker 1 is not held in reserve");
  refused("leave:worker:2", "worker 2 has not joined");
  refused("leave:worker:0,leave:worker:1", "no worker is active at step");
  refused("join:worker:7", "the job has workers 0 to 2");
  refused("shrink", "expected join:worker:W or leave:worker:W");
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->worker_changes == "reserve:worker:2");
  temp_dir none;
  auto cfg = config_for(probe_with_table(), none, 50);
  cfg.checkpoints.every = 0;
  auto k = job::start(cfg);
  REQUIRE_MESSAGE(k, describe(k.error()));
  auto at = (*k)->change_workers("leave:worker:0");
  REQUIRE(!at);
  CHECK(describe(at.error()).find("takes no checkpoints") != std::string::npos);
}

}  // namespace keel::test
