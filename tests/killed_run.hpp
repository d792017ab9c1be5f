#pragma once
// A `keel train` / `keel cluster` process killed with SIGKILL mid-run, once
// it has committed checkpoints: what a `--resume` test continues. The kill
// follows an observed event (the Nth manifest in the checkpoint directory),
// never a delay; the run must be long enough to be still going then.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cli_run.hpp"  // wait_until

extern char** environ;

namespace keel::test {

// Counts committed checkpoints by listing the directory: opening a store
// would clean up a live writer's temporary files.
inline size_t committed_checkpoints(const std::filesystem::path& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator(dir, ec))
    n += entry.path().extension() == ".manifest";
  return n;
}

// Runs `argv` (argv[0] is the program's path), waits (at most `patience`)
// until `ready()` holds (`what` says what it waits for), then kills the
// process with SIGKILL and reaps it. Fails the test if the process ended
// by itself first, or `ready` never held.
inline void kill9_when(std::vector<std::string> argv_s, const std::function<bool()>& ready, const std::string& what,
                       std::chrono::milliseconds patience = std::chrono::seconds(60)) {
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
  int status = 0;
  bool exited = false;
  bool checkpointed = wait_until(
    [&] {
      exited = exited || ::waitpid(pid, &status, WNOHANG) == pid;
      return exited || ready();
    },
    patience, std::chrono::milliseconds(2));
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  REQUIRE_MESSAGE(!exited, argv_s[0] << " ended (status " << status
                                     << ") before it could be killed; raise --steps");
  REQUIRE_MESSAGE(checkpointed, "no " << what << " within " << patience.count() << " ms");
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

// kill9_when `dir` holds `checkpoints` committed checkpoints.
inline void kill9_after_checkpoints(std::vector<std::string> argv_s, const std::filesystem::path& dir,
                                    size_t checkpoints,
                                    std::chrono::milliseconds patience = std::chrono::seconds(60)) {
  kill9_when(
    std::move(argv_s), [&] { return committed_checkpoints(dir) >= checkpoints; },
    std::to_string(checkpoints) + " checkpoints in " + dir.string(), patience);
}

}  // namespace keel::test
