#pragma once
// A metrics_http_server serves one page, GET /metrics, over HTTP/1.1 on a
// thread of its own, for a scraper such as Prometheus. Each request gets
// one response and the connection is closed: 200 with the body `render`
// returns (text/plain; version=0.0.4), 404 for any other path, 405 for any
// other method, 400 for a request it cannot parse, one whose head exceeds
// 8 KiB, or one not complete within 10 s. A bad client never stops the
// server, and the thread that owns the server never waits on a client.
// `render` runs on the server's thread, so it must be thread-safe with
// respect to whatever feeds it (a metrics_registry is). Destroying the
// server closes its socket and joins its thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace keel {

struct metrics_http_options {
  std::string address = "127.0.0.1";  // an IPv4 or IPv6 address to bind
  uint16_t port = 0;                  // 0: the OS picks one (see port())
};

class metrics_http_server {
 public:
  // Binds and starts serving, or returns nullptr and sets `error` to a
  // message naming the address and port and what went wrong (not an IP
  // address, in use, not permitted).
  static std::unique_ptr<metrics_http_server> start(const metrics_http_options& options,
                                                    std::function<std::string()> render,
                                                    std::string& error);

  // The port bound (the OS's pick when options.port was 0).
  uint16_t port() const;
  // The address bound, as given.
  const std::string& address() const;

  ~metrics_http_server();
  metrics_http_server(const metrics_http_server&) = delete;
  metrics_http_server& operator=(const metrics_http_server&) = delete;

  struct impl;

 private:
  explicit metrics_http_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// The response to one request head (everything before the blank line):
// status line, headers and body, as the server writes it. Pure, so tests
// can check every branch without a socket.
std::string metrics_http_response(const std::string& request_head,
                                  const std::function<std::string()>& render);

}  // namespace keel
