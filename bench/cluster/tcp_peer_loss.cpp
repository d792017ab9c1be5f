// The ceiling of node_failover.sh's kill -9 figure, in plain POSIX (no keel
// code): how long after SIGKILL a process sees a loopback TCP peer go away.
// A child process connects and blocks; the parent kills it and waits in
// poll(2) until reading the connection returns end of file (or an error).
// The time from the kill(2) call to that read, median over the trials.
// Usage: tcp_peer_loss [trials=20]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// Connects to 127.0.0.1:port and blocks until killed.
[[noreturn]] void peer(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    _exit(1);
  for (;;) ::pause();
}

// Milliseconds from SIGKILL of a connected peer to end of file on its socket.
double one_trial(int listener, uint16_t port) {
  pid_t child = ::fork();
  if (child < 0)
    die("tcp_peer_loss: fork");
  if (child == 0)
    peer(port);
  int fd = ::accept(listener, nullptr, nullptr);
  if (fd < 0)
    die("tcp_peer_loss: accept");
  auto t0 = std::chrono::steady_clock::now();
  if (::kill(child, SIGKILL) != 0)
    die("tcp_peer_loss: kill");
  char byte;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0)
      die("tcp_peer_loss: poll");
    if (::read(fd, &byte, 1) <= 0)
      break;
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  ::waitpid(child, nullptr, 0);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  long trials = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 20;
  if (trials <= 0) {
    std::fprintf(stderr, "tcp_peer_loss: trials must be a positive number\n");
    return 2;
  }
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listener, 4) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    die("tcp_peer_loss: listen");
  const uint16_t port = ntohs(a.sin_port);
  std::vector<double> ms;
  for (long i = 0; i < trials; ++i) ms.push_back(one_trial(listener, port));
  std::sort(ms.begin(), ms.end());
  std::printf(
      "tcp peer killed (SIGKILL) -> end of file seen: median %.3f ms "
      "(min %.3f, max %.3f, %ld trials)\n",
      ms[ms.size() / 2], ms.front(), ms.back(), trials);
  return 0;
}
