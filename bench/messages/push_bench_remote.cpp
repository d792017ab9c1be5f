// The two-process half of push_bench: a forked server process publishes a
// sink actor through CAF's middleman and accepts raw TCP connections; the
// parent measures both transfers of the same bytes (the raw one as the
// fastest of a few passes: it is the ceiling).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <caf/io/all.hpp>

#include "messages/register_types.hpp"
#include "push_bench.hpp"

namespace keel::bench {

namespace {

void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void configure(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
}

int listen_loopback(uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 1) != 0)
    die("push_bench: raw TCP listen");
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

// The raw TCP ceiling is the fastest of this many transfers.
constexpr int raw_passes = 3;

// Reads `total` bytes from one connection, then answers with one byte.
void raw_server(int listen_fd, size_t total) {
  int c = ::accept(listen_fd, nullptr, nullptr);
  if (c < 0)
    die("push_bench: accept");
  std::vector<char> buf(1 << 20);
  size_t got = 0;
  while (got < total) {
    auto n = ::read(c, buf.data(), buf.size());
    if (n <= 0)
      die("push_bench: raw read");
    got += static_cast<size_t>(n);
  }
  char ack = 1;
  if (::write(c, &ack, 1) != 1)
    die("push_bench: raw ack");
  ::close(c);
}

[[noreturn]] void serve(int port_pipe, int stop_pipe, size_t bytes, size_t pushes) {
  uint16_t raw_port = 0;
  int lfd = listen_loopback(raw_port);
  std::thread raw([&] {
    for (int i = 0; i < raw_passes; ++i) raw_server(lfd, bytes * pushes);
  });
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  auto s = sys.spawn(sink, decode_limits{});
  auto port = sys.middleman().publish(s, 0, "127.0.0.1", true);
  if (!port)
    die("push_bench: publish");
  uint16_t ports[2] = {*port, raw_port};
  if (::write(port_pipe, ports, sizeof(ports)) != sizeof(ports))
    die("push_bench: port pipe");
  char c;
  while (::read(stop_pipe, &c, 1) > 0) {
  }
  raw.join();
  caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  std::_Exit(0);
}

double raw_tcp_gbps(uint16_t port, size_t bytes, size_t pushes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    die("push_bench: raw connect");
  std::vector<char> payload(bytes, 3);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < pushes; ++i) {
    size_t off = 0;
    while (off < bytes) {
      auto n = ::write(fd, payload.data() + off, bytes - off);
      if (n <= 0)
        die("push_bench: raw write");
      off += static_cast<size_t>(n);
    }
  }
  char ack;
  if (::read(fd, &ack, 1) != 1)
    die("push_bench: raw ack read");
  double secs = seconds_since(t0);
  ::close(fd);
  return static_cast<double>(bytes * pushes) / secs / 1e9;
}

double keel_gbps(uint16_t port, size_t floats, size_t pushes) {
  caf::actor_system_config cfg;
  configure(cfg);
  caf::actor_system sys{cfg};
  auto server = sys.middleman().remote_actor("127.0.0.1", port);
  if (!server) {
    std::fprintf(stderr, "push_bench: %s\n", sys.render(server.error()).c_str());
    std::exit(1);
  }
  caf::scoped_actor self{sys};
  std::vector<float> grad(floats, 0.5f);
  constexpr size_t window = 4;
  size_t sent = 0, done = 0;
  auto send_one = [&] { self->send(*server, make_push(grad, ++sent)); };
  auto await_one = [&] {
    self->receive([&](double) { ++done; },
                  caf::after(std::chrono::seconds(60)) >> [] {
                    std::fprintf(stderr, "push_bench: remote sink did not answer within 60 s\n");
                    std::exit(1);
                  });
  };
  for (int i = 0; i < 2; ++i) {  // connect and warm both pools
    send_one();
    await_one();
  }
  sent = done = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (sent < pushes && sent < window)
    send_one();
  while (done < pushes) {
    await_one();
    if (sent < pushes)
      send_one();
  }
  return static_cast<double>(floats * 4 * pushes) / seconds_since(t0) / 1e9;
}

}  // namespace

remote_figures run_remote(size_t floats, size_t pushes) {
  int port_pipe[2], stop_pipe[2];
  if (::pipe(port_pipe) != 0 || ::pipe(stop_pipe) != 0)
    die("push_bench: pipe");
  pid_t child = ::fork();
  if (child < 0)
    die("push_bench: fork");
  if (child == 0) {
    ::close(port_pipe[0]);
    ::close(stop_pipe[1]);
    serve(port_pipe[1], stop_pipe[0], floats * 4, pushes);
  }
  ::close(port_pipe[1]);
  ::close(stop_pipe[0]);
  uint16_t ports[2];
  if (::read(port_pipe[0], ports, sizeof(ports)) != sizeof(ports))
    die("push_bench: server did not report its ports");
  remote_figures out;
  for (int i = 0; i < raw_passes; ++i)
    out.tcp_gbps = std::max(out.tcp_gbps, raw_tcp_gbps(ports[1], floats * 4, pushes));
  out.keel_gbps = keel_gbps(ports[0], floats, pushes);
  ::close(stop_pipe[1]);
  ::close(port_pipe[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return out;
}

}  // namespace keel::bench
