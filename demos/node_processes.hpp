#pragma once
// The node processes `keel cluster` runs on this machine: each is this very
// program as `keel node --listen 127.0.0.1:PORT` (a free port below the
// kernel's ephemeral range the first time, which no outgoing connection
// takes, the same port when it is started again), with the cluster
// secret in a file only this user can read. Faults reach them as real
// signals: SIGKILL, SIGSTOP, SIGCONT. Every process still running is
// terminated (SIGCONT, then SIGTERM, then SIGKILL after a grace period) and
// reaped when the set is destroyed. Each node reads its standard input from
// a pipe this process holds open (`--exit-on-stdin-eof`): when this process
// dies, even by SIGKILL, its nodes end too. Every process it reaps is
// recorded with its peak resident set size (the kernel's count, from
// wait4: exact, also for a node killed with SIGKILL). Not thread-safe: one
// owner.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace keel::cli {

class node_processes {
 public:
  // `program`: the keel binary; `secret_file`: the cluster secret;
  // `extra`: more `keel node` flags (heartbeat, data dir).
  node_processes(std::string program, std::filesystem::path secret_file, std::vector<std::string> extra);
  ~node_processes();
  node_processes(const node_processes&) = delete;
  node_processes& operator=(const node_processes&) = delete;

  // Starts node `i` (the next index, or again on its old port), waiting at
  // most `timeout` for its "listening on" line.
  caf::expected<uint16_t> start(size_t i, std::chrono::milliseconds timeout);
  size_t size() const { return nodes_.size(); }
  uint16_t port(size_t i) const { return nodes_[i].port; }
  pid_t pid(size_t i) const { return nodes_[i].pid; }

  // Sends `sig` to node i's process; SIGKILL also reaps it.
  caf::error signal(size_t i, int sig);

  // Stops every node still running (as the destructor does) and reaps it.
  void stop_all();

  // A node process this set reaped: which node it was, its pid, its peak
  // resident set size in kB, and whether it was killed with SIGKILL (a
  // kill9 fault, or one that did not stop within the grace period).
  struct ended_process {
    size_t node = 0;
    pid_t pid = -1;
    long peak_rss_kb = 0;
    bool killed = false;
  };
  // In the order they were reaped.
  const std::vector<ended_process>& ended() const { return ended_; }

 private:
  struct node {
    pid_t pid = -1;
    uint16_t port = 0;
    int out = -1;  // its standard output, read for the port line
    int in = -1;   // its standard input, held open while it should live
  };
  void stop(node& n);
  // Starts node i on its port (nodes_[i].port, 0: any).
  caf::expected<uint16_t> start_on(size_t i, std::chrono::milliseconds timeout);
  // waitpid for node n's process (blocking or not), recording its peak RSS;
  // whether it was reaped.
  bool reap(node& n, bool block, bool killed);

  std::string program_;
  std::filesystem::path secret_file_;
  std::vector<std::string> extra_;
  std::vector<node> nodes_;
  std::vector<ended_process> ended_;
};

}  // namespace keel::cli
