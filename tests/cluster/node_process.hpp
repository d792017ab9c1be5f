#pragma once
// A `keel node` (or other keel command) child process for tests: started with posix_spawn, its
// standard output read line by line (with timeouts), its standard error
// captured in a file, and always reaped: the destructor kills (SIGKILL) and
// waits for a process still running, so a failed check leaves no orphans.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_run.hpp"  // wait_until

namespace keel::test {

class node_process {
 public:
  // Runs `keel node ARGS...`, waits up to `timeout` for its listening line
  // and parses the port and node id from it. Fails the test if none comes.
  static std::unique_ptr<node_process> start(const std::vector<std::string>& args,
                                             std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // Runs `keel COMMAND ARGS...` (a node by default) without waiting for
  // anything.
  static std::unique_ptr<node_process> launch(const std::vector<std::string>& args,
                                              const std::string& command = "node");
  ~node_process();
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  const std::string& node_id() const { return node_id_; }

  void signal(int sig) const;
  // Waits for the process to end; its exit status (or 128 + signal), or
  // nullopt if it is still running after `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // The next line of standard output containing `text`, or nullopt.
  std::optional<std::string> wait_stdout(const std::string& text, std::chrono::milliseconds timeout);
  // Waits until standard error holds `text`; false after `timeout`.
  bool wait_log(const std::string& text, std::chrono::milliseconds timeout) const;
  std::string log() const;
  // Closes the write end of the child's standard input (EOF).
  void close_stdin();

 private:
  node_process() = default;
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string log_path_;
  std::string pending_;  // stdout bytes not yet returned as lines
  uint16_t port_ = 0;
  std::string node_id_;
  std::optional<int> status_;
};

}  // namespace keel::test
