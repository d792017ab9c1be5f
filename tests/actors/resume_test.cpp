// A run whose process died continues from its newest valid checkpoint
// (job_config::checkpoints.resume, keel train --resume DIR) and ends BSP bit-identical to
// a run never interrupted. The CLI test kills a real `keel train` process
// with SIGKILL once it has committed checkpoints.
#include <chrono>
#include <sstream>

#include "cli_run.hpp"
#include "job_fixture.hpp"
#include "keel_output.hpp"
#include "killed_run.hpp"

using namespace keel;
using namespace keel::test;

namespace {

job_config probe_run(const temp_dir& dir) {
  auto c = config_for(probe(), dir, 120);
  c.checkpoints.every = 10;
  return c;
}

// A BSP run of sparse logistic regression with Adam: its parameters depend on
// every gradient's value and order, and on the optimizer state (of sparse
// rows too) a checkpoint carries.
job_config sparse_adam_run(const temp_dir& dir) {
  auto c = config_for(small_sparse_lr(), dir, 120);
  c.training.optimizer.kind = optimizer_kind::adam;
  c.training.optimizer.lr = 0.01f;
  return c;
}

// `c` with no checkpoint after `n` committing, so that its workers wait at
// the checkpoint window (step (n + 2) x every) until they are stopped: the
// stop below comes from an on_event callback, which runs on the job's event
// thread while the training goes on, and a run not held could end before it
// lands (then stop() fails, `wait` returns the result, and nothing was
// stopped mid-run). Shard 0's first n snapshots reach the checkpointer (1 ms
// late), every later one is lost, and no checkpoint is given up within the
// test. The faults are armed at step 0, before any worker has a window to
// step in; a resume from checkpoint n skips them, so `c` stays the
// configuration of the run to resume.
job_config held_after_checkpoint(job_config c, uint64_t n) {
  REQUIRE((n + 2) * c.checkpoints.every < c.training.steps);
  auto plan = parse_fault_plan("delay:shard:0>checkpointer@0x" + std::to_string(n) + "+1ms," +
                               "drop:shard:0>checkpointer@0x" +
                               std::to_string(c.training.steps / c.checkpoints.every));
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  c.faults.plan = *plan;
  c.checkpoints.timeout = std::chrono::minutes(5);
  return c;
}

// Starts `c` (held_after_checkpoint) and stops it (job::stop, mid-run) once
// checkpoint `n` is durable.
void run_until_checkpoint(const job_config& c, uint64_t n) {
  auto first = job::start(c);
  REQUIRE_MESSAGE(first, describe(first.error()));
  bool stopped = false;
  (*first)->on_event([&](const job_event& e) {
    if (e.kind == event_kind::checkpoint && e.checkpoint == n && !stopped) {
      stopped = true;
      CHECK(!(*first)->stop());
    }
  });
  auto cut = (*first)->wait(std::chrono::minutes(1));
  REQUIRE(stopped);
  CHECK(!cut);
  first->reset();
  REQUIRE(committed_checkpoints(c.checkpoints.dir) >= n);
}

// Runs `keel ARGS` to its end; returns its exit status and output.
std::pair<int, std::string> run_keel(const std::string& arguments) {
  auto r = run_command(std::string(KEEL_CLI_PATH) + " " + arguments);
  REQUIRE(r.exited);
  return {r.status, r.output};
}

}  // namespace

TEST_CASE("a stopped run resumed from its checkpoints ends bit-identical to an uninterrupted one") {
  temp_dir clean_dir;
  auto clean = run(probe_run(clean_dir));
  REQUIRE_MESSAGE(clean, describe(clean.error()));

  temp_dir dir;
  auto c = held_after_checkpoint(probe_run(dir), 3);
  run_until_checkpoint(c, 3);

  // Without resume, the directory is refused, naming the way out.
  auto refused = job::start(c);
  REQUIRE(!refused);
  CHECK(describe(refused.error()).find("--resume") != std::string::npos);

  c.checkpoints.resume = true;
  auto resumed = run(c);
  REQUIRE_MESSAGE(resumed, describe(resumed.error()));
  CHECK(resumed->params_sha256 == clean->params_sha256);
  check_exactly_once(c, *resumed);
  bool from_checkpoint = false;
  for (auto& e : resumed->events)
    from_checkpoint = from_checkpoint || (e.kind == event_kind::restored && e.checkpoint == 3 &&
                                          e.step == 30);
  CHECK(from_checkpoint);
  CHECK(resumed->resumed_at_step == 30);
  CHECK(clean->resumed_at_step == 0);
}

TEST_CASE("a stopped sparse-lr run with adam resumed from its checkpoints ends bit-identical to an uninterrupted one") {
  temp_dir clean_dir;
  auto clean = run(sparse_adam_run(clean_dir));
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(clean->restarts.empty());

  temp_dir dir;
  auto c = held_after_checkpoint(sparse_adam_run(dir), 3);
  run_until_checkpoint(c, 3);
  c.checkpoints.resume = true;
  auto resumed = run(c);
  REQUIRE_MESSAGE(resumed, describe(resumed.error()));
  CHECK(resumed->resumed_at_step == 30);  // checkpoint 3, the newest durable one
  CHECK(resumed->params_sha256 == clean->params_sha256);
}

TEST_CASE("resume refuses an empty directory and a checkpoint of another shape") {
  temp_dir empty;
  auto c = probe_run(empty);
  c.checkpoints.resume = true;
  auto nothing = job::start(c);
  REQUIRE(!nothing);
  CHECK(describe(nothing.error()).find("nothing to resume") != std::string::npos);

  temp_dir dir;
  auto two = probe_run(dir);
  auto first = job::start(two);
  REQUIRE(first);
  bool stopped = false;
  (*first)->on_event([&](const job_event& e) {
    if (e.kind == event_kind::checkpoint && !stopped) {
      stopped = true;
      (*first)->stop();
    }
  });
  (void)(*first)->wait(std::chrono::minutes(1));
  first->reset();
  auto three = probe_run(dir);
  three.training.shards = 3;
  three.checkpoints.resume = true;
  auto mismatch = job::start(three);
  REQUIRE(!mismatch);
  CHECK(describe(mismatch.error()).find("this job has 3 shards") != std::string::npos);
}

TEST_CASE("keel train killed with SIGKILL mid-run resumes with --resume DIR, bit-identical") {
  const std::string flags = "--model probe --steps 4000 --checkpoint-every 10 --quiet";
  auto [clean_status, clean_out] = run_keel("train " + flags);
  REQUIRE_MESSAGE(clean_status == 0, clean_out);

  temp_dir dir;
  kill9_after_checkpoints({KEEL_CLI_PATH, "train", "--model", "probe", "--steps", "4000", "--checkpoint-every",
                           "10", "--checkpoint-dir", dir.path().string(), "--quiet"},
                          dir.path(), 3);
  REQUIRE(committed_checkpoints(dir.path()) >= 3);

  auto [status2, out2] = run_keel("train --resume " + dir.path().string());
  REQUIRE_MESSAGE(status2 == 0, out2);
  CHECK(sha_in(out2) == sha_in(clean_out));
  CHECK(out2.find("rollbacks, resumed at step ") != std::string::npos);
  CHECK(out2.find("exactly once: every parameter equals") != std::string::npos);

  // A resume of a directory keel train did not write names the missing file.
  temp_dir stranger;
  auto [status3, out3] = run_keel("train --resume " + stranger.path().string());
  CHECK(status3 == 1);
  CHECK(out3.find("keel-train.args") != std::string::npos);
}

TEST_CASE("keel train of sparse-lr with adam killed with SIGKILL mid-run resumes with --resume DIR, bit-identical to the uninterrupted run") {
  // A real gradient and Adam's moments (of the sparse rows too): unlike the
  // probe's, these parameters depend on every update's value and order and
  // on the optimizer state the checkpoint carried across the kill.
  const std::string flags =
    "--model sparse-lr --optimizer adam --lr 0.01 --steps 300 --checkpoint-every 20 --quiet";
  auto [clean_status, clean_out] = run_keel("train " + flags);
  REQUIRE_MESSAGE(clean_status == 0, clean_out);

  temp_dir dir;
  std::vector<std::string> argv = {KEEL_CLI_PATH, "train"};
  std::istringstream words(flags + " --checkpoint-dir " + dir.path().string());
  for (std::string w; words >> w;) argv.push_back(w);
  kill9_after_checkpoints(argv, dir.path(), 3);

  auto [status, out] = run_keel("train --resume " + dir.path().string());
  REQUIRE_MESSAGE(status == 0, out);
  CHECK_MESSAGE(sha_in(out) == sha_in(clean_out), out);
  // It continued from a checkpoint of the killed run, not from step 0.
  CHECK(number_after(out, "rollbacks, resumed at step ") >= 60);
  CHECK(number_after(out, "pushes acked ") == number_after(out, ", applied "));
}

TEST_CASE("after a resume the first progress line reports the samples per second this run trained") {
  // Progress every 2,000 of 20,000 steps; killed past step 3,000 (three
  // checkpoints of 1,000), so the resumed run starts past a progress point.
  temp_dir dir;
  kill9_after_checkpoints({KEEL_CLI_PATH, "train", "--model", "probe", "--steps", "20000", "--checkpoint-every",
                           "1000", "--checkpoint-dir", dir.path().string()},
                          dir.path(), 3);
  auto [status, out] = run_keel("train --resume " + dir.path().string());
  REQUIRE_MESSAGE(status == 0, out);
  auto first = out.find("samples/s ");
  REQUIRE_MESSAGE(first != std::string::npos, out);
  CHECK_MESSAGE(out.substr(first, 12) != "samples/s 0 ", out);
}
