#pragma once
// Shared by the tests that drive real processes: running a command to its
// end with its output captured, and waiting (bounded) for a condition that
// only polling can observe (a file appearing, a line in another process's
// log). Every test program has tests/ on its include path.

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <doctest/doctest.h>

namespace keel::test {

struct command_result {
  bool exited = false;  // ended by exit(), not by a signal
  int status = -1;      // its exit status, or 128 + the signal
  std::string output;   // standard output and standard error, interleaved
};

// Runs `command` through the shell with standard error folded into the
// output, to its end.
inline command_result run_command(const std::string& command) {
  command_result r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    r.output.append(buf.data(), n);
  int raw = ::pclose(p);
  r.exited = WIFEXITED(raw);
  r.status = r.exited ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
}

// Polls `pred` every `every` until it holds (true) or `timeout` passes
// (false). For conditions no message announces; never a synchronisation by
// itself.
template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

}  // namespace keel::test
