#pragma once
// A connection_flood is an unauthenticated local peer that tries to lock
// everyone else out of a port: on a thread of its own it holds `count` idle
// connections to 127.0.0.1:port, sending nothing, and reopens each as soon
// as the server closes it (issue 40: 64 such connections locked the
// operator out of keel's admin and metrics endpoints). Destroying it stops
// the thread and closes every connection.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <thread>
#include <vector>

namespace keel::test {

class connection_flood {
 public:
  connection_flood(uint16_t port, size_t count) : port_(port), fds_(count, -1) {
    for (auto& fd : fds_) fd = open_one();
    thread_ = std::thread([this] { run(); });
  }
  ~connection_flood() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_)
      if (fd >= 0)
        ::close(fd);
  }
  connection_flood(const connection_flood&) = delete;
  connection_flood& operator=(const connection_flood&) = delete;

  // Connections the server closed and the flood opened again.
  uint64_t reopened() const { return reopened_; }

 private:
  // A non-blocking connection under way (or -1 when no socket is left).
  int open_one() const {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port_);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);  // EINPROGRESS: poll tells
    return fd;
  }

  void run() {
    std::vector<pollfd> polled(fds_.size());
    while (!stop_) {
      for (size_t i = 0; i < fds_.size(); ++i) {
        if (fds_[i] < 0)
          fds_[i] = open_one();
        polled[i] = {fds_[i], POLLIN, 0};
      }
      if (::poll(polled.data(), polled.size(), 10) <= 0)
        continue;
      for (size_t i = 0; i < fds_.size(); ++i) {
        if (polled[i].revents == 0)
          continue;
        // Read what the server says (a 408, say) and keep the connection
        // until it is closed: then open another at once.
        char buf[512];
        auto n = ::recv(fds_[i], buf, sizeof buf, 0);
        if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
          continue;
        ::close(fds_[i]);
        fds_[i] = open_one();
        ++reopened_;
      }
    }
  }

  uint16_t port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> reopened_{0};
  std::thread thread_;
};

}  // namespace keel::test
