#pragma once
// The node processes `keel cluster` runs on this machine: each is this very
// program as `keel node --listen 127.0.0.1:PORT` (an OS-picked port the
// first time, the same port when it is started again), with the cluster
// secret in a file only this user can read. Faults reach them as real
// signals: SIGKILL, SIGSTOP, SIGCONT. Every process still running is
// terminated (SIGCONT, then SIGTERM, then SIGKILL after a grace period) and
// reaped when the set is destroyed. Each node reads its standard input from
// a pipe this process holds open (`--exit-on-stdin-eof`): when this process
// dies, even by SIGKILL, its nodes end too. Not thread-safe: one owner.

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

 private:
  struct node {
    pid_t pid = -1;
    uint16_t port = 0;
    int out = -1;  // its standard output, read for the port line
    int in = -1;   // its standard input, held open while it should live
  };
  void stop(node& n);

  std::string program_;
  std::filesystem::path secret_file_;
  std::vector<std::string> extra_;
  std::vector<node> nodes_;
};

}  // namespace keel::cli
