// Failure injection on the real path: whole jobs with actors killed by name
// at given steps. The probe model makes loss or double application visible
// in every parameter; BSP runs must end bit-identical to the fault-free run.
// And the job's own contract: it runs whether or not anyone waits, and its
// event callbacks run on a thread of their own.
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "job_fixture.hpp"

using namespace keel;
using namespace keel::test;

TEST_CASE("a fault-free probe run applies every acknowledged push exactly once") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 60);
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(c, *r);
  CHECK(r->rollbacks == 0);
  CHECK(r->restarts.empty());
}

TEST_CASE("killing any one actor mid-run loses no acknowledged push and applies none twice") {
  for (std::string victim : {"shard:0", "shard:1", "worker:0", "worker:1", "checkpointer", "shards",
                             "workers", "root"}) {
    CAPTURE(victim);
    temp_dir dir;
    auto c = config_for(probe(), dir, 80);
    c.faults.plan = {kill_at(victim, 25)};
    auto r = run(c);
    REQUIRE_MESSAGE(r, describe(r.error()));
    check_exactly_once(c, *r);
    check_faults_fired(c, *r);
    CHECK(count(*r, event_kind::fault, victim) == 1);
    // Training cannot finish without the victim's restart, except for the
    // checkpointer, whose restart may still be under way when it ends.
    if (victim == "root")
      CHECK(r->rollbacks == 1);
    else if (victim != "checkpointer")
      CHECK(count(*r, event_kind::restart, victim) == 1);
  }
}

TEST_CASE("a shard and a worker lost together, and repeated kills, still apply every push once") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 120);
  c.faults.plan = {kill_at("shard:0", 15), kill_at("worker:0", 15), kill_at("shard:1", 40),
              kill_at("worker:1", 41),  kill_at("shards", 70),   kill_at("checkpointer", 71),
              kill_at("workers", 90)};
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(c, *r);
  check_faults_fired(c, *r);
  // Each kill ended an incarnation that was then replaced: the victims'
  // restarts (a supervisor's restart brings its children back as fresh
  // starts, not restarts) or a rollback of the whole tree.
  for (std::string victim : {"shard:0", "worker:0", "shard:1", "worker:1", "shards", "checkpointer",
                             "workers"}) {
    CAPTURE(victim);
    CHECK(count(*r, event_kind::fault, victim) >= 1);
  }
  CHECK(count(*r, event_kind::restart) + r->rollbacks >= 7);
}

TEST_CASE("BSP runs end with the same params_sha256 with and without kills") {
  auto model = small_sparse_lr();
  auto config = [&](const temp_dir& dir) {
    auto c = config_for(model, dir, 60);
    c.training.optimizer.kind = optimizer_kind::adam;  // optimizer state must survive restores too
    c.training.optimizer.lr = 0.05f;
    c.training.batch_size = 16;
    return c;
  };
  temp_dir clean_dir;
  auto clean = run(config(clean_dir));
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  std::vector<std::vector<fault>> schedules = {
    {kill_at("shard:1", 23)},
    {kill_at("worker:0", 23)},
    {kill_at("shard:0", 23), kill_at("worker:1", 23)},
    {kill_at("root", 35)},
  };
  for (auto& kills : schedules) {
    CAPTURE(to_string(kills));
    temp_dir dir;
    auto c = config(dir);
    c.faults.plan = kills;
    auto r = run(c);
    REQUIRE_MESSAGE(r, describe(r.error()));
    check_faults_fired(c, *r);
    // The kills really replaced the victims (or, for root, rolled the tree
    // back): equal hashes after kills that did nothing would prove nothing.
    for (auto& k : kills)
      if (k.target == "root")
        CHECK(r->rollbacks == 1);
      else
        CHECK(count(*r, event_kind::restart, k.target) >= 1);
    CHECK(r->params_sha256 == clean->params_sha256);
  }
}

TEST_CASE("a shard killed after a checkpoint restarts from it and the workers replay the rest") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 300);
  auto j = job::start(c);
  REQUIRE_MESSAGE(j, describe(j.error()));
  bool killed = false;
  // Kill as soon as the job has seen a checkpoint commit: the restart must
  // then start from that checkpoint, not from scratch.
  (*j)->on_event([&](const job_event& e) {
    if (e.kind == event_kind::checkpoint && !killed) {
      killed = true;
      auto err = (*j)->kill("shard:1");
      CHECK_MESSAGE(!err, describe(err));
    }
  });
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  REQUIRE(killed);
  check_exactly_once(c, *r);
  bool restored_from_checkpoint = false;
  for (auto& e : r->events)
    if (e.kind == event_kind::restart && e.actor == "shard:1" && e.snapshot.rfind("checkpoint-", 0) == 0)
      restored_from_checkpoint = true;
  if (!restored_from_checkpoint)
    for (auto& e : r->events)
      MESSAGE(to_string(e));
  CHECK(restored_from_checkpoint);
}

TEST_CASE("kills faster than the restart intensity allows make the job fail with an error naming the child") {
  temp_dir dir;
  // Long enough that the workers cannot finish while the kills below go
  // round (each waits for the job's thread to see the victim back): with
  // 200 steps a loaded machine once let the run end first, and the job
  // succeeded. If the supervisors never gave up, it would end after these
  // steps and fail the test.
  auto c = config_for(probe(), dir, 20000);
  c.recovery.max_restarts = 1;
  c.recovery.restart_period = std::chrono::seconds(60);
  // No checkpoints: a shard restarted from one older than a commit its
  // workers had just truncated to would need a rollback, and two rollbacks
  // are the rollback policy's escalation (root), not the shards'
  // supervisor's, the one this test is about.
  c.checkpoints.every = 0;
  // Kills at steps would fire only as the job's wait loop sees the steps,
  // and a short run can end before enough of them: kill now, and again each
  // time shard:0 is back (restarted by its supervisor, or started afresh by
  // a restarted one), until the supervisors above give up.
  auto j = job::start(c);
  REQUIRE_MESSAGE(j, describe(j.error()));
  auto first = (*j)->kill("shard:0");
  REQUIRE_MESSAGE(!first, describe(first));
  uint64_t restarts = 0;
  (*j)->on_event([&](const job_event& e) {
    if ((e.kind == event_kind::restart || e.kind == event_kind::start) && e.actor == "shard:0") {
      restarts += e.kind == event_kind::restart;
      (void)(*j)->kill("shard:0");  // may find the tree already gone after the escalation
    }
  });
  auto r = (*j)->wait(std::chrono::minutes(2));
  CHECK(restarts >= 1);
  REQUIRE(!r);
  CHECK(is(r.error(), errc::escalated));
  CHECK_MESSAGE(describe(r.error()).find("shards") != std::string::npos, describe(r.error()));
}

TEST_CASE("a job refuses a configuration it cannot run, naming the problem") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 10);
  c.training.workers = 0;
  auto j = job::start(c);
  REQUIRE(!j);
  CHECK(describe(j.error()).find("training.workers: 0 is too small (at least 1)") != std::string::npos);
  auto k = parse_kill_shorthand("shard:0@step=x");
  REQUIRE(!k);
  CHECK(describe(k.error()).find("'shard:0@step=x'") != std::string::npos);
  auto ok = parse_kill_shorthand("shard:0@step=40,worker:1@90");
  REQUIRE(ok);
  CHECK(to_string(*ok) == "kill:shard:0@40,kill:worker:1@90");
  // A fault planned past the run's last step would silently never fire.
  auto late = config_for(probe(), dir, 10);
  late.faults.plan = {kill_at("shard:0", 11)};
  auto refused = job::start(late);
  REQUIRE(!refused);
  CHECK(describe(refused.error()).find("'kill:shard:0@11': step 11 is past the run's last step 10") !=
        std::string::npos);
  for (float scale : {0.0f, -1.0f, std::nanf("")}) {
    auto bad_scale = config_for(probe(), dir, 10);
    bad_scale.training.optimizer.gradient_scale = scale;
    auto no = job::start(bad_scale);
    REQUIRE(!no);
    CHECK(describe(no.error()).find("optimizer.gradient_scale") != std::string::npos);
  }
}

TEST_CASE("under SSP and ASP too, kills lose no acknowledged push and apply none twice") {
  for (auto rule : {consistency{consistency_kind::ssp, 2}, consistency{consistency_kind::asp, 0}}) {
    CAPTURE(to_string(rule));
    temp_dir dir;
    auto c = config_for(probe(), dir, 120);
    c.training.rule = rule;
    c.faults.plan = {kill_at("shard:0", 30), kill_at("worker:1", 60), kill_at("shard:1", 61),
                kill_at("checkpointer", 62)};
    auto r = run(c);
    REQUIRE_MESSAGE(r, describe(r.error()));
    check_exactly_once(c, *r);
    check_faults_fired(c, *r);
  }
}

TEST_CASE("an embedding application reads the parameters mid-run and stops the job") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 100000);
  auto j = job::start(c);
  REQUIRE_MESSAGE(j, describe(j.error()));
  auto p = (*j)->parameters();
  REQUIRE_MESSAGE(p, describe(p.error()));
  CHECK(p->dense.size() == 1000);
  CHECK(p->sparse.size() == 8);
  for (auto v : p->dense)
    CHECK(v >= 0.0f);  // the probe only ever adds
  CHECK(!(*j)->stop());
  auto r = (*j)->wait(std::chrono::seconds(10));
  REQUIRE(!r);
  CHECK(is(r.error(), errc::shutting_down));
  CHECK(is((*j)->stop(), errc::shutting_down));
}

TEST_CASE("a job refuses a checkpoint directory holding an earlier run's checkpoints") {
  // A rollback reads the newest valid checkpoint there: an earlier run's
  // would put its state into this run.
  temp_dir dir;
  auto c = config_for(probe(), dir, 60);
  c.checkpoints.every = 10;  // the window makes steps past 20 wait for a commit
  auto first = run(c);
  REQUIRE_MESSAGE(first, describe(first.error()));
  REQUIRE(first->checkpoints >= 1);
  auto again = job::start(c);
  REQUIRE(!again);
  CHECK(is(again.error(), errc::invalid_argument));
  CHECK(describe(again.error()).find("of an earlier run") != std::string::npos);
}

TEST_CASE("a job accounts what its checkpoints cost: the writes, and the steps the window held back") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 40);
  c.checkpoints.every = 4;  // steps from 8 on wait for a commit
  // Every snapshot of shard:0 reaches the checkpointer 300 ms late, so
  // every checkpoint commits at least 300 ms after its step; the workers
  // reach the window (two checkpoints ahead) long before that and wait.
  auto plan = parse_fault_plan("delay:shard:0>checkpointer@1x100+300ms");
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  c.faults.plan = *plan;
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(c, *r);
  REQUIRE(r->checkpoints >= 1);
  CHECK(r->checkpoint_write_seconds > 0);
  CHECK(r->checkpoint_write_cpu_seconds > 0);
  CHECK(r->checkpoint_write_cpu_seconds <= r->checkpoint_write_seconds + 1e-3);
  // From step 8 on, each commit held both workers back for most of those
  // 300 ms: at least 8 commits.
  CHECK(r->window_wait_seconds > 0);
  // Each worker's wait is a part of its run: together at most the run's
  // time once per worker.
  CHECK(r->window_wait_seconds <= c.training.workers * r->seconds);
}

TEST_CASE("a job nobody waits for trains on: its checkpoints commit, and wait then returns the result") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 200);
  c.checkpoints.every = 10;  // without commits the window holds every worker at step 20
  c.progress.every = 10;
  auto j = job::start(c);
  REQUIRE_MESSAGE(j, describe(j.error()));
  std::mutex mtx;
  std::condition_variable seen;
  uint64_t checkpoints = 0;
  uint64_t progress_step = 0;
  (*j)->on_event([&](const job_event& e) {
    std::lock_guard<std::mutex> lock(mtx);
    if (e.kind == event_kind::checkpoint)
      ++checkpoints;
    if (e.kind == event_kind::progress)
      progress_step = std::max(progress_step, e.step);
    seen.notify_all();
  });
  // Nobody calls wait: the job commits checkpoints and moves the window on
  // its own, so the workers pass step 100.
  {
    std::unique_lock<std::mutex> lock(mtx);
    bool trained = seen.wait_for(lock, std::chrono::seconds(30),
                                 [&] { return checkpoints >= 5 && progress_step >= 100; });
    CHECK_MESSAGE(trained, "checkpoints seen " << checkpoints << ", progress to step " << progress_step);
  }
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(c, *r);
  CHECK(r->steps == c.training.steps);
  CHECK(r->checkpoints >= 5);
  std::lock_guard<std::mutex> lock(mtx);
  CHECK(progress_step == c.training.steps);  // every progress event was delivered before wait returned
}

TEST_CASE("on_event callbacks run on one thread of their own, and one that blocks holds back no training") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 400);
  c.checkpoints.every = 10;
  c.progress.every = 10;
  auto j = job::start(c);
  REQUIRE_MESSAGE(j, describe(j.error()));
  std::mutex mtx;
  std::condition_variable changed;
  bool release = false;
  std::set<std::thread::id> callback_threads;
  caf::error nested_wait;
  (*j)->on_event([&](const job_event& e) {
    std::unique_lock<std::mutex> lock(mtx);
    callback_threads.insert(std::this_thread::get_id());
    if (e.kind != event_kind::progress || nested_wait)
      return;
    // The first progress event: the outcome comes after this callback, so
    // a wait from here is refused rather than left to hang.
    auto r = (*j)->wait(std::chrono::seconds(1));
    nested_wait = r ? caf::error{} : r.error();
    changed.notify_all();
    changed.wait(lock, [&] { return release; });
  });
  // While the callback blocks, the shards' parameters go on growing: the
  // probe's values count the pushes applied, and more than a window's worth
  // (2 workers x 20 steps) needs checkpoints committed meanwhile.
  {
    std::unique_lock<std::mutex> lock(mtx);
    REQUIRE(changed.wait_for(lock, std::chrono::seconds(30), [&] { return bool(nested_wait); }));
  }
  CHECK(is(nested_wait, errc::invalid_argument));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  float applied = 0;
  while (applied < 2 * 100 && std::chrono::steady_clock::now() < deadline) {
    auto p = (*j)->parameters();
    if (p)
      applied = p->dense.at(0);
  }
  CHECK(applied >= 2 * 100);
  {
    std::lock_guard<std::mutex> lock(mtx);
    release = true;
  }
  changed.notify_all();
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(c, *r);
  std::lock_guard<std::mutex> lock(mtx);
  CHECK(callback_threads.size() == 1);
  CHECK(callback_threads.count(std::this_thread::get_id()) == 0);
}
