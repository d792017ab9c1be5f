// Strangers at a node's port (issue 19): a peer that has not proved the
// cluster secret must not reach CAF's middleman at all (CAF 0.17 allocates
// what a BASP header announces and lets any BASP peer kill any actor it can
// name), must cost the node a bounded amount, and must leave a line in its
// log. Each test plays the attack, then checks that the node still serves
// a coordinator that holds the secret. Loopback only.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include <caf/io/all.hpp>

#include "cluster_fixture.hpp"

using namespace keel;
using namespace keel::test;
using namespace std::chrono_literals;

namespace {

constexpr auto patience = 10s;

// The node still does its job for a member: connect, spawn, status.
void check_serves(cluster_fixture& f, node_process& n) {
  auto h = f.connect(n);
  auto shard = spawn_small_shard(h, patience);
  CHECK(to_string(shard.node()) == n.node_id());
  auto status = status_of(h, patience);
  REQUIRE_MESSAGE(status, describe(status.error()));
  CHECK(status->children == 1);
  CHECK_FALSE(n.wait_exit(0ms));
}

// A TCP connection to 127.0.0.1:port, opened without waiting (a flood must
// not block on the node's accept queue); -1 if no socket could be had.
int open_connection(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);  // EINPROGRESS
  return fd;
}

// The peak resident set (VmHWM) of process `pid` in bytes: a buffer the
// node allocated and freed again before we look still shows.
uint64_t peak_rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  uint64_t kb = 0;
  while (in >> key)
    if (key == "VmHWM:") {
      in >> kb;
      break;
    }
  return kb * 1024;
}

// Sets this process's soft descriptor limit; returns the previous one.
rlim_t set_fd_limit(rlim_t soft) {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  auto old = r.rlim_cur;
  r.rlim_cur = std::min(soft, r.rlim_max);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &r) == 0);
  return old;
}

}  // namespace

TEST_CASE("a stranger's CAF connection is refused at the gate and logged, so its kill and anonymous exit never reach the agent") {
  cluster_fixture f;
  auto n = f.start_node();
  caf::actor_system_config cfg;
  configure_cluster_system(cfg);
  caf::actor_system outsider{cfg};
  exempt_caf_network_layer_from_leak_checks(outsider);
  // What any process that can open a TCP connection could do before: get
  // the published agent and stop it (exit_reason::kill cannot be trapped).
  auto agent = outsider.middleman().remote_actor("127.0.0.1", n->port());
  if (agent) {
    caf::anon_send_exit(*agent, caf::exit_reason::user_shutdown);
    caf::scoped_actor self{outsider};
    self->send_exit(*agent, caf::exit_reason::kill);
  }
  CHECK_FALSE_MESSAGE(agent, "a peer without the secret got the node agent's handle");
  CHECK_MESSAGE(n->wait_log("refused a connection from 127.0.0.1:", patience), n->log());
  CHECK_MESSAGE(
      n->wait_log("to port " + std::to_string(n->port()) + ": not a keel cluster handshake",
                  patience),
      n->log());
  check_serves(f, *n);
  n->signal(SIGTERM);
  CHECK_MESSAGE(n->wait_exit(patience) == 0, n->log());
}

TEST_CASE("a 32-byte BASP header announcing a 4 GiB payload is refused: the connection closes, the node's peak RSS stays put, it serves on") {
  cluster_fixture f;
  auto n = f.start_node();
  check_serves(f, *n);  // warmed up: what a serving node holds anyway
  auto before = peak_rss_bytes(n->pid());
  // A BASP client handshake header (CAF 0.17: operation 1, three bytes
  // padding and flags, payload length, operation data, source and
  // destination actor): valid, and announcing 2^32 - 1 payload bytes.
  unsigned char header[32] = {0x01, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  int fd = open_connection(n->port());
  REQUIRE(fd >= 0);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  REQUIRE(::send(fd, header, sizeof header, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof header));
  // The node closes the connection (EOF, or a reset for the unread bytes);
  // a node that waits for the payload instead times this read out.
  char buf[256];
  ssize_t got = 0;
  while ((got = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  bool timed_out = got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  ::close(fd);
  CHECK_MESSAGE(!timed_out, "the node kept the connection open, waiting for the announced payload");
  CHECK_MESSAGE(n->wait_log("not a keel cluster handshake", patience), n->log());
  auto after = peak_rss_bytes(n->pid());
  MESSAGE("peak RSS before " << before / 1000000 << " MB, after " << after / 1000000 << " MB");
  CHECK(after < before + 32 * 1024 * 1024);
  auto h = f.connect(*n);
  auto status = status_of(h, patience);
  REQUIRE_MESSAGE(status, describe(status.error()));
  CHECK_FALSE(n->wait_exit(0ms));
}

TEST_CASE("idle connections beyond the cap are closed with a logged reason while a member still connects") {
  cluster_fixture f;
  // The node gets 256 descriptors, as a small ulimit would give it: without
  // a cap, 300 idle connections leave it none for a member.
  auto old_limit = set_fd_limit(256);
  auto n = f.start_node({"--max-unauthenticated", "16", "--handshake-timeout-ms", "1000"});
  set_fd_limit(old_limit);
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    int fd = open_connection(n->port());
    REQUIRE(fd >= 0);
    idle.push_back(fd);
  }
  CHECK_MESSAGE(n->wait_log("16 connections are awaiting authentication (the limit)", patience),
                n->log());
  // The flood is summarised, not logged line by line.
  CHECK_MESSAGE(n->wait_log("more refused connections in 1000 ms not logged one by one", patience),
                n->log());
  check_serves(f, *n);
  for (int fd : idle) ::close(fd);
  n->signal(SIGTERM);
  CHECK_MESSAGE(n->wait_exit(patience) == 0, n->log());
}

TEST_CASE("a peer holding another secret is refused at the gate, and the node logs from where and why") {
  cluster_fixture f;
  auto n = f.start_node();
  auto wrong = *cluster_secret::from_bytes("not-the-cluster-secret-at-all", "wrong");
  auto h = connect_node(*f.sys, "127.0.0.1", n->port(), wrong, patience);
  REQUIRE_FALSE(h);
  CHECK_MESSAGE(is(h.error(), errc::not_authenticated), describe(h.error()));
  CHECK_MESSAGE(
      n->wait_log("to port " + std::to_string(n->port()) + ": node " + to_string(f.sys->node()) +
                      " closed the connection without proving the cluster secret",
                  patience),
      n->log());
  check_serves(f, *n);
}
