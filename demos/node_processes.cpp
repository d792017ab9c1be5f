#include "node_processes.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "actors/data_plane/data_plane_wire.hpp"
#include "messages/errors.hpp"

extern char** environ;

namespace keel::cli {

namespace {

// The first port of the range the kernel hands out to outgoing connections
// (32768 unless configured otherwise).
uint16_t ephemeral_low() {
  std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
  unsigned low = 0;
  if (!(f >> low) || low <= 1024 || low > 65535)
    return 32768;
  return static_cast<uint16_t>(low);
}

// Whether 127.0.0.1:port can be listened on now, as a node listens.
bool bindable(uint16_t port) {
  return static_cast<bool>(dp::listen_on("127.0.0.1", port, 1, "keel cluster"));
}

// A free port below the ephemeral range, from a random place in the 16384
// ports before it (0, any, if none is free). A node keeps its port across
// restarts (--respawn-nodes); an OS-picked port lies in the ephemeral range,
// where an outgoing connection of any process may take it while the node
// is down, and the restarted node could not listen again.
uint16_t free_port_below_ephemeral() {
  const unsigned high = ephemeral_low();
  const unsigned low = high > 16384 + 1024 ? high - 16384 : 1024;
  std::random_device seed;
  std::mt19937 rng(seed());
  const unsigned span = high - low;
  const unsigned from = rng() % span;
  for (unsigned k = 0; k < span; ++k) {
    auto port = static_cast<uint16_t>(low + (from + k) % span);
    if (bindable(port))
      return port;
  }
  return 0;
}

}  // namespace

node_processes::node_processes(std::string program, std::filesystem::path secret_file,
                               std::vector<std::string> extra)
    : program_(std::move(program)), secret_file_(std::move(secret_file)), extra_(std::move(extra)) {}

node_processes::~node_processes() {
  stop_all();
}

void node_processes::stop_all() {
  for (auto& n : nodes_) stop(n);
}

bool node_processes::reap(node& n, bool block, bool killed) {
  int status = 0;
  rusage usage{};
  if (::wait4(n.pid, &status, block ? 0 : WNOHANG, &usage) != n.pid) {
    if (block)
      n.pid = -1;  // not ours to wait for any more: nothing to record
    return false;
  }
  auto i = static_cast<size_t>(&n - nodes_.data());
  ended_.push_back({i, n.pid, usage.ru_maxrss, killed});
  n.pid = -1;
  return true;
}

void node_processes::stop(node& n) {
  if (n.out >= 0)
    ::close(n.out);
  n.out = -1;
  if (n.in >= 0)
    ::close(n.in);
  n.in = -1;
  if (n.pid <= 0)
    return;
  ::kill(n.pid, SIGCONT);
  ::kill(n.pid, SIGTERM);
  for (int i = 0; i < 300; ++i) {  // up to 3 s for a clean exit
    if (reap(n, false, false))
      return;
    ::poll(nullptr, 0, 10);
  }
  ::kill(n.pid, SIGKILL);
  reap(n, true, true);
}

caf::expected<uint16_t> node_processes::start(size_t i, std::chrono::milliseconds timeout) {
  if (i > nodes_.size())
    return make_error(errc::invalid_argument, "node index " + std::to_string(i) + " skips a node");
  if (i == nodes_.size())
    nodes_.emplace_back();
  if (nodes_[i].port != 0)
    return start_on(i, timeout);
  // A first start: a port of our choosing, another if someone took it
  // between the check and the node's listen.
  caf::expected<uint16_t> started = make_error(errc::io_error, "no free port");
  for (int attempt = 0; attempt < 3; ++attempt) {
    nodes_[i].port = free_port_below_ephemeral();
    started = start_on(i, timeout);
    if (started || nodes_[i].port == 0)
      break;
  }
  return started;
}

caf::expected<uint16_t> node_processes::start_on(size_t i, std::chrono::milliseconds timeout) {
  auto& n = nodes_[i];
  stop(n);
  // Close-on-exec, so that no other node inherits these ends (dup2 clears
  // the flag on the node's own standard input and output).
  int pipe_fds[2];
  int in_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return make_error(errc::io_error, std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(in_fds, O_CLOEXEC) != 0) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return make_error(errc::io_error, std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> args = {program_, "node", "--listen", "127.0.0.1:" + std::to_string(n.port),
                                   "--secret-file", secret_file_.string(), "--exit-on-stdin-eof"};
  args.insert(args.end(), extra_.begin(), extra_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, in_fds[0], STDIN_FILENO);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program_.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipe_fds[1]);
  ::close(in_fds[0]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    ::close(in_fds[1]);
    return make_error(errc::io_error, "cannot start " + program_ + " node: " + std::strerror(rc));
  }
  n.pid = pid;
  n.out = pipe_fds[0];
  n.in = in_fds[1];
  // Read until the "listening on HOST:PORT" line, within the timeout.
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string marker = "listening on 127.0.0.1:";
  while (text.find('\n', text.find(marker)) == std::string::npos || text.find(marker) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return make_error(errc::timeout, "node:" + std::to_string(i) + " did not say where it listens within " +
                                         std::to_string(timeout.count()) + " ms");
    pollfd p{n.out, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      continue;
    char buf[512];
    auto got = ::read(n.out, buf, sizeof buf);
    if (got <= 0)
      return make_error(errc::io_error, "node:" + std::to_string(i) + " exited before it listened");
    text.append(buf, static_cast<size_t>(got));
  }
  auto at = text.find(marker) + marker.size();
  n.port = static_cast<uint16_t>(std::stoul(text.substr(at)));
  return n.port;
}

caf::error node_processes::signal(size_t i, int sig) {
  if (i >= nodes_.size() || nodes_[i].pid <= 0)
    return make_error(errc::not_found, "node:" + std::to_string(i) + " has no running process");
  if (::kill(nodes_[i].pid, sig) != 0)
    return make_error(errc::io_error, "node:" + std::to_string(i) + ": " + std::strerror(errno));
  if (sig == SIGKILL)
    reap(nodes_[i], true, true);
  return {};
}

}  // namespace keel::cli
