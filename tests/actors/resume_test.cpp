// A run whose process died continues from its newest valid checkpoint
// (job_config::resume, keel train --resume DIR) and ends BSP bit-identical to
// a run never interrupted. The CLI test kills a real `keel train` process
// with SIGKILL once it has committed checkpoints.
#include <chrono>
#include <csignal>
#include <fstream>
#include <spawn.h>
#include <sys/wait.h>

#include "cli_run.hpp"
#include "job_fixture.hpp"

extern char** environ;

using namespace keel;
using namespace keel::test;

namespace {

job_config probe_run(const temp_dir& dir) {
  auto c = config_for(probe(), dir, 120);
  c.checkpoint_every = 10;
  return c;
}

// Counts manifests by listing the directory: opening a store would clean up
// a live writer's temporary files.
size_t committed_checkpoints(const std::filesystem::path& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator(dir, ec))
    n += entry.path().extension() == ".manifest";
  return n;
}

// Runs `keel ARGS` to its end; returns its exit status and output.
std::pair<int, std::string> run_keel(const std::string& arguments) {
  auto r = run_command(std::string(KEEL_CLI_PATH) + " " + arguments);
  REQUIRE(r.exited);
  return {r.status, r.output};
}

std::string sha_in(const std::string& output) {
  auto at = output.find("params_sha256 ");
  REQUIRE_MESSAGE(at != std::string::npos, output);
  return output.substr(at + 14, 64);
}

}  // namespace

TEST_CASE("a stopped run resumed from its checkpoints ends bit-identical to an uninterrupted one") {
  temp_dir clean_dir;
  auto clean = run(probe_run(clean_dir));
  REQUIRE_MESSAGE(clean, describe(clean.error()));

  temp_dir dir;
  auto c = probe_run(dir);
  auto first = job::start(c);
  REQUIRE_MESSAGE(first, describe(first.error()));
  // Stop it once three checkpoints are durable, mid-run.
  bool stopped = false;
  (*first)->on_event([&](const job_event& e) {
    if (e.kind == event_kind::checkpoint && e.checkpoint == 3 && !stopped) {
      stopped = true;
      CHECK(!(*first)->stop());
    }
  });
  auto cut = (*first)->wait(std::chrono::minutes(1));
  REQUIRE(stopped);
  CHECK(!cut);
  first->reset();
  REQUIRE(committed_checkpoints(dir.path()) >= 3);

  // Without resume, the directory is refused, naming the way out.
  auto refused = job::start(c);
  REQUIRE(!refused);
  CHECK(describe(refused.error()).find("--resume") != std::string::npos);

  c.resume = true;
  auto resumed = run(c);
  REQUIRE_MESSAGE(resumed, describe(resumed.error()));
  CHECK(resumed->params_sha256 == clean->params_sha256);
  check_exactly_once(c, *resumed);
  bool from_checkpoint = false;
  for (auto& e : resumed->events)
    from_checkpoint = from_checkpoint || (e.kind == event_kind::restored && e.checkpoint >= 3 &&
                                          e.step >= 30);
  CHECK(from_checkpoint);
  CHECK(resumed->resumed_at_step >= 30);
  CHECK(clean->resumed_at_step == 0);
}

TEST_CASE("resume refuses an empty directory and a checkpoint of another shape") {
  temp_dir empty;
  auto c = probe_run(empty);
  c.resume = true;
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
  three.shards = 3;
  three.resume = true;
  auto mismatch = job::start(three);
  REQUIRE(!mismatch);
  CHECK(describe(mismatch.error()).find("this job has 3 shards") != std::string::npos);
}

TEST_CASE("keel train killed with SIGKILL mid-run resumes with --resume DIR, bit-identical") {
  const std::string flags = "--model probe --steps 4000 --checkpoint-every 10 --quiet";
  auto [clean_status, clean_out] = run_keel("train " + flags);
  REQUIRE_MESSAGE(clean_status == 0, clean_out);

  temp_dir dir;
  std::vector<std::string> argv_s = {KEEL_CLI_PATH, "train",    "--model", "probe",
                                     "--steps",     "4000",      "--checkpoint-every",
                                     "10",          "--checkpoint-dir", dir.path().string(),
                                     "--quiet"};
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, KEEL_CLI_PATH, nullptr, nullptr, argv.data(), environ) == 0);
  // Wait (bounded) until it has committed checkpoints, then kill it hard.
  int status = 0;
  bool exited = false;
  wait_until(
    [&] {
      exited = exited || ::waitpid(pid, &status, WNOHANG) == pid;
      return exited || committed_checkpoints(dir.path()) >= 3;
    },
    std::chrono::seconds(60), std::chrono::milliseconds(2));
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  REQUIRE_MESSAGE(!exited, "keel train finished before it could be killed; raise --steps");
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
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
