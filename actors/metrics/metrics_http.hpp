#pragma once
// A metrics_http_server serves one page, GET /metrics (or, started with
// serve(), whatever its responder answers), over HTTP/1.1 on a
// thread of its own, for a scraper such as Prometheus. Each request gets
// one response and the connection is closed: 200 with the body `render`
// returns (text/plain; version=0.0.4), 404 for any other path, 405 for any
// other method, 400 for a request it cannot parse, one whose head exceeds
// max_request_bytes, or one not complete within read_timeout (408, and the
// connection is closed at once). A bad client never stops the server, and
// the thread that owns the server never waits on a client. Its cost is
// bounded like every port keel opens: at most max_connections at once, and
// a flood of idle ones cannot keep a client with a request out. A newer
// connection beyond the cap takes the slot of the oldest one that has no
// response being written (an answered one lingering for its client to
// close first, then one that has sent no complete request), never of one
// younger than eviction_grace; while every slot is held, newer connections
// wait in the listen backlog, in order (actors/net/connection_slots.hpp).
// A response being written keeps its slot, for at most read_timeout. It
// never takes a descriptor that would leave the process fewer than
// descriptor_reserve free (so the job's checkpoints do not fail because
// scrapers, or strangers, hold descriptors). Each refusal and eviction is
// logged with the peer's address and the port, at most 20 lines a second,
// then a count.
// `render` runs on the server's thread, so it must be thread-safe with
// respect to whatever feeds it (a metrics_registry is). Destroying the
// server closes its socket and joins its thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace keel {

struct metrics_http_options {
  std::string name = "metrics";       // in errors and log lines ("keel metrics: ...")
  std::string address = "127.0.0.1";  // an IPv4 or IPv6 address to bind
  uint16_t port = 0;                  // 0: the OS picks one (see port())
  size_t max_connections = 64;        // open at once; a newer one evicts an idle one
  std::chrono::milliseconds read_timeout{5000};  // for a request's head, and for writing its response
  // A connection is not evicted for a newer one this soon after it was
  // accepted: its time to send its request.
  std::chrono::milliseconds eviction_grace{100};
  size_t max_request_bytes = 8192;               // a request's head
  // Descriptors left free for the rest of the process: a connection whose
  // descriptor is within this many of RLIMIT_NOFILE is closed on accept
  // (accept returns the lowest free descriptor, so a high one means the
  // ones below are all taken).
  size_t descriptor_reserve = 64;
  // Refusals, one line each (rate-limited); null: standard error, prefixed
  // "keel metrics: ". Called on the server's thread.
  std::function<void(const std::string&)> log;
};

struct metrics_http_stats {
  uint64_t accepted = 0;  // connections served
  uint64_t refused = 0;   // closed on accept: the descriptor reserve, accept errors, every slot answering
  uint64_t evicted = 0;   // closed for a newer connection at the cap
};

// The whole response (status line, headers, body) to one request head.
// Called on the server's thread, one request at a time.
using http_responder = std::function<std::string(const std::string& request_head)>;

class metrics_http_server {
 public:
  // Binds and starts serving, or returns nullptr and sets `error` to a
  // message naming the address and port and what went wrong (not an IP
  // address, in use, not permitted).
  static std::unique_ptr<metrics_http_server> start(const metrics_http_options& options,
                                                    std::function<std::string()> render,
                                                    std::string& error);
  // The same server answering every request with `respond` instead of the
  // metrics page (keel cluster's admin endpoint, actors/cluster/cluster_admin.hpp).
  static std::unique_ptr<metrics_http_server> serve(const metrics_http_options& options, http_responder respond,
                                                    std::string& error);

  // The port bound (the OS's pick when options.port was 0).
  uint16_t port() const;
  // The address bound, as given.
  const std::string& address() const;
  metrics_http_stats stats() const;

  ~metrics_http_server();
  metrics_http_server(const metrics_http_server&) = delete;
  metrics_http_server& operator=(const metrics_http_server&) = delete;

  struct impl;

 private:
  explicit metrics_http_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// A response with `body`, closing the connection.
std::string http_response(const std::string& status, const std::string& content_type, const std::string& body,
                          const std::string& extra_headers = {});
// A text/plain response: `why` and a newline.
std::string http_plain(const std::string& status, const std::string& why, const std::string& extra_headers = {});
// Splits "METHOD TARGET HTTP/1.x" into its parts; false if it is not one
// (a method of token characters, a target of printable ASCII from '/').
bool parse_request_line(const std::string& line, std::string& method, std::string& target);
// The same for the first line of a request head (CR LF or LF ended).
bool parse_request_head(const std::string& head, std::string& method, std::string& target);

// The response to one request head (everything before the blank line):
// status line, headers and body, as the server writes it. Pure, so tests
// can check every branch without a socket.
std::string metrics_http_response(const std::string& request_head,
                                  const std::function<std::string()>& render);

}  // namespace keel
