#pragma once
// A TCP relay for tests that records every byte it carries: listens on
// 127.0.0.1 ports and relays each connection to a target address, one
// thread per direction, keeping what each direction carried as one string
// (so a pattern split across reads is still found). What sits on the path
// between two keel processes sees exactly this.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

namespace keel::test {

class recording_proxy {
 public:
  ~recording_proxy() { stop(); }

  // Listens on 127.0.0.1:`port` (0: any; the port is returned) and relays
  // to target_host:target_port (0: the port it listens on). The target is
  // connected to when a connection comes, so it may start listening later.
  uint16_t relay(uint16_t port, const std::string& target_host, uint16_t target_port) {
    int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(l >= 0);
    int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    auto addr = address("127.0.0.1", port);
    REQUIRE_MESSAGE(::bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, "proxy cannot bind " << port);
    REQUIRE(::listen(l, 16) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len);
    if (target_port == 0)
      target_port = ntohs(addr.sin_port);
    std::lock_guard<std::mutex> guard(mtx_);
    fds_.push_back(l);
    threads_.emplace_back([this, l, target_host, target_port] { accept_loop(l, target_host, target_port); });
    return ntohs(addr.sin_port);
  }

  // Everything carried so far, one string per connection and direction.
  std::vector<std::string> recordings() const {
    std::lock_guard<std::mutex> guard(mtx_);
    std::vector<std::string> out;
    for (auto& r : streams_) out.push_back(*r);
    return out;
  }

  size_t bytes() const {
    size_t n = 0;
    for (auto& r : recordings()) n += r.size();
    return n;
  }

  void stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> guard(mtx_);
      stopping_ = true;
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
    std::lock_guard<std::mutex> guard(mtx_);
    for (int fd : fds_) ::close(fd);
    fds_.clear();
  }

 private:
  static sockaddr_in address(const std::string& host, uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    return a;
  }

  void accept_loop(int listener, std::string host, uint16_t port) {
    for (;;) {
      int in = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (in < 0)
        return;  // shut down
      int out = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      auto target = address(host, port);
      if (out < 0 || ::connect(out, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
        ::close(in);
        if (out >= 0)
          ::close(out);
        continue;
      }
      std::lock_guard<std::mutex> guard(mtx_);
      if (stopping_) {
        ::close(in);
        ::close(out);
        return;
      }
      fds_.push_back(in);
      fds_.push_back(out);
      auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
      streams_.push_back(a);
      streams_.push_back(b);
      threads_.emplace_back([this, in, out, a] { pump(in, out, *a); });
      threads_.emplace_back([this, in, out, b] { pump(out, in, *b); });
    }
  }

  void pump(int from, int to, std::string& record) {
    char buf[65536];
    for (;;) {
      auto n = ::recv(from, buf, sizeof buf, 0);
      if (n <= 0)
        break;
      {
        std::lock_guard<std::mutex> guard(mtx_);
        record.append(buf, static_cast<size_t>(n));
      }
      if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n)
        break;
    }
    ::shutdown(to, SHUT_WR);
    ::shutdown(from, SHUT_RD);
  }

  mutable std::mutex mtx_;
  bool stopping_ = false;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<std::string>> streams_;
};

}  // namespace keel::test
