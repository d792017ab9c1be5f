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
#include "models/model_registry.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/directory_lock.hpp"
#include "storage/store_layout.hpp"
#include "test_tier.hpp"

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

TEST_CASE("a stopped ctr-fm run with adagrad (rows of 5 in 26 embedding tables) resumed from its checkpoints ends bit-identical") {
  model_options mo;
  mo.ctr.vocabulary = 100'000;
  mo.ctr.train_examples = 8192;
  mo.ctr.test_examples = 2000;
  mo.ctr.fm_factors = 4;
  auto made = make_model("ctr-fm", mo);
  REQUIRE_MESSAGE(made, describe(made.error()));
  auto ctr_run = [&](const temp_dir& dir) {
    auto c = config_for(*made, dir, 100);
    c.checkpoints.every = 10;
    c.training.optimizer.kind = optimizer_kind::adagrad;  // rows' accumulators must come back too
    c.training.optimizer.lr = 0.5f;
    c.training.tables.capacity_rows = 300;  // and the recency order of evictions
    return c;
  };
  temp_dir clean_dir;
  auto clean = run(ctr_run(clean_dir));
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  uint64_t evictions = 0;
  for (auto& t : clean->tables) evictions += t.evictions;
  CHECK(evictions > 0);

  temp_dir dir;
  auto c = held_after_checkpoint(ctr_run(dir), 3);
  run_until_checkpoint(c, 3);
  c.checkpoints.resume = true;
  auto resumed = run(c);
  REQUIRE_MESSAGE(resumed, describe(resumed.error()));
  CHECK(resumed->resumed_at_step == 30);
  CHECK(resumed->params_sha256 == clean->params_sha256);
  CHECK(resumed->quality.log_loss == clean->quality.log_loss);
  REQUIRE(resumed->tables.size() == clean->tables.size());
  for (size_t t = 0; t < clean->tables.size(); ++t) CHECK(resumed->tables[t].rows == clean->tables[t].rows);
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
  // The shard count is part of the run's configuration: named as the field that differs.
  CHECK_MESSAGE(describe(mismatch.error()).find("shards (2 there, 3 here)") != std::string::npos,
                describe(mismatch.error()));
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

KEEL_RELEASE_TEST_CASE("keel train of sparse-lr with adam killed with SIGKILL mid-run resumes with --resume DIR, bit-identical to the uninterrupted run") {
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

TEST_CASE("a job refuses a checkpoint directory another job of this process is writing") {
  temp_dir dir;
  auto c = probe_run(dir);
  c.training.steps = 1000000;  // runs until stopped
  auto first = job::start(c);
  REQUIRE_MESSAGE(first, describe(first.error()));
  c.checkpoints.resume = true;
  auto second = job::start(c);
  REQUIRE(!second);
  auto text = describe(second.error());
  CHECK_MESSAGE(text.find("is in use by pid " + std::to_string(::getpid()) + " on host ") !=
                  std::string::npos,
                text);
  CHECK(!(*first)->stop());
}

TEST_CASE("keel train --resume DIR while the run writing DIR is alive is refused, naming its pid and host") {
  temp_dir dir;
  std::vector<std::string> argv_s = {KEEL_CLI_PATH, "train", "--model", "probe", "--steps", "4000000",
                                     "--checkpoint-every", "10", "--checkpoint-dir",
                                     dir.path().string(), "--quiet"};
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
  bool checkpointed = wait_until([&] { return committed_checkpoints(dir.path()) >= 1; },
                                 std::chrono::seconds(60), std::chrono::milliseconds(2));
  // --timeout: without the lock the second run would train on (and fail the test at its end).
  auto [status, out] = run_keel("train --resume " + dir.path().string() + " --timeout 20");
  ::kill(pid, SIGKILL);
  int raw = 0;
  ::waitpid(pid, &raw, 0);
  REQUIRE(checkpointed);
  CHECK(status == 1);
  CHECK_MESSAGE(out.find("is in use by pid " + std::to_string(pid) + " on host ") != std::string::npos, out);
  // The holder died: the kernel released its lock.
  auto after = directory_lock::acquire(dir.path());
  CHECK_MESSAGE(after, describe(after.error()));
}

namespace {

// The manifest of checkpoint `id` in `dir`.
checkpoint_manifest manifest_in(const std::filesystem::path& dir, uint64_t id) {
  auto m = read_manifest_file(*posix_io(), dir / manifest_name(id), *buffer_pool::process_default());
  REQUIRE_MESSAGE(m, describe(m.error()));
  return *m;
}

// Copies checkpoint `id`'s manifest and snapshots from `from` into `to`.
void copy_checkpoint(const std::filesystem::path& from, const std::filesystem::path& to, uint64_t id) {
  auto m = manifest_in(from, id);
  namespace fs = std::filesystem;
  fs::copy_file(from / manifest_name(id), to / manifest_name(id), fs::copy_options::overwrite_existing);
  for (auto& e : m.shards)
    fs::copy_file(from / e.file, to / e.file, fs::copy_options::overwrite_existing);
}

}  // namespace

TEST_CASE("a resumed run keeps its run id, which every checkpoint carries, and a fresh run gets a new one") {
  temp_dir dir;
  auto c = held_after_checkpoint(probe_run(dir), 3);
  run_until_checkpoint(c, 3);
  auto first_id = manifest_in(dir.path(), 3).run.run_id;
  CHECK(first_id.size() == 32);
  CHECK(manifest_in(dir.path(), 3).run.config.find("seed=1\n") != std::string::npos);
  c.checkpoints.resume = true;
  auto resumed = run(c);
  REQUIRE_MESSAGE(resumed, describe(resumed.error()));
  CHECK(resumed->run_id == first_id);
  temp_dir other;
  auto fresh = run(probe_run(other));
  REQUIRE(fresh);
  CHECK(fresh->run_id.size() == 32);
  CHECK(fresh->run_id != first_id);
  CHECK(fresh->config_hash == resumed->config_hash);
}

TEST_CASE("resume refuses a checkpoint of another configuration, naming the field that differs") {
  temp_dir dir;
  auto c = held_after_checkpoint(probe_run(dir), 3);
  run_until_checkpoint(c, 3);
  c.training.seed = 7;
  c.checkpoints.resume = true;
  auto refused = job::start(c);
  REQUIRE(!refused);
  auto text = describe(refused.error());
  CHECK_MESSAGE(text.find("seed (1 there, 7 here)") != std::string::npos, text);
  CHECK(text.find(manifest_in(dir.path(), 3).run.run_id) != std::string::npos);
}

TEST_CASE("resume refuses a directory into which another run's checkpoint was copied, and keel inspect flags it") {
  temp_dir mine_dir, theirs_dir;
  run_until_checkpoint(held_after_checkpoint(probe_run(mine_dir), 3), 3);
  auto theirs_cfg = probe_run(theirs_dir);
  theirs_cfg.checkpoints.keep = 5;
  run_until_checkpoint(held_after_checkpoint(theirs_cfg, 5), 5);
  auto theirs = manifest_in(theirs_dir.path(), 5).run.run_id;
  auto mine = manifest_in(mine_dir.path(), 3).run.run_id;
  REQUIRE(theirs != mine);
  copy_checkpoint(theirs_dir.path(), mine_dir.path(), 5);
  auto c = probe_run(mine_dir);
  c.checkpoints.resume = true;
  auto refused = job::start(c);
  REQUIRE(!refused);
  auto text = describe(refused.error());
  CHECK_MESSAGE(text.find("more than one run") != std::string::npos, text);
  CHECK(text.find(theirs) != std::string::npos);
  CHECK(text.find(mine) != std::string::npos);

  auto [status, out] = run_keel("inspect " + mine_dir.path().string());
  CHECK(status == 1);
  CHECK_MESSAGE(out.find("run " + theirs) != std::string::npos, out);
  CHECK(out.find("FOREIGN: of run " + mine) != std::string::npos);
  CHECK_MESSAGE(number_after(out, "damaged, ") >= 1, out);  // its own, against the newest (copied) one
  // The shards wrote their own files, tagged, and the manifests record how long each write took.
  CHECK_MESSAGE(out.find(".shard-0.") != std::string::npos, out);
  CHECK_MESSAGE(out.find("written in ") != std::string::npos, out);
}

TEST_CASE("resume refuses checkpoints without a run identity (a keel from before run ids), saying so") {
  temp_dir dir;
  auto c = held_after_checkpoint(probe_run(dir), 3);
  run_until_checkpoint(c, 3);
  for (auto& entry : std::filesystem::directory_iterator(dir.path())) {
    auto name = parse_store_file_name(entry.path().filename().string());
    if (!name || name->kind != store_file_kind::manifest)
      continue;
    auto id = name->checkpoint;
    auto m = manifest_in(dir.path(), id);
    m.run = {};
    REQUIRE(!write_manifest_file(*posix_io(), dir.path(), manifest_name(id), m, "test"));
  }
  c.checkpoints.resume = true;
  auto refused = job::start(c);
  REQUIRE(!refused);
  CHECK_MESSAGE(describe(refused.error()).find("carries no run identity") != std::string::npos,
                describe(refused.error()));
}

TEST_CASE("a rollback that meets another run's checkpoint copied in mid-run refuses it by name instead of restoring it") {
  temp_dir theirs_dir, mine_dir;
  auto theirs_cfg = probe_run(theirs_dir);
  theirs_cfg.checkpoints.keep = 20;
  auto theirs = run(theirs_cfg);  // checkpoints 1..12, at steps 10..120
  REQUIRE_MESSAGE(theirs, describe(theirs.error()));
  const uint64_t copied = 12;
  auto theirs_id = manifest_in(theirs_dir.path(), copied).run.run_id;

  // Held after our checkpoint 2: nothing of ours commits past id 2, so the
  // copied id 12 is the newest checkpoint in the directory.
  auto c = held_after_checkpoint(probe_run(mine_dir), 2);
  auto j = job::start(c);
  REQUIRE_MESSAGE(j, describe(j.error()));
  bool rolled = false;
  (*j)->on_event([&](const job_event& e) {
    if (e.kind == event_kind::checkpoint && e.checkpoint == 2 && !rolled) {
      rolled = true;
      copy_checkpoint(theirs_dir.path(), mine_dir.path(), copied);
      CHECK(!(*j)->kill("root"));  // the whole tree rolls back to the newest valid checkpoint
    }
  });
  auto r = (*j)->wait(std::chrono::minutes(1));
  REQUIRE(rolled);
  REQUIRE(!r);
  auto text = describe(r.error());
  CHECK_MESSAGE(text.find("checkpoint 12") != std::string::npos, text);
  CHECK_MESSAGE(text.find("is of run " + theirs_id) != std::string::npos, text);
  CHECK_MESSAGE(text.find("(a checkpoint of another run)") != std::string::npos, text);
}
