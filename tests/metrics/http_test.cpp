// The metrics endpoint against real clients: curl run as a process, and a
// raw TCP client for the requests curl will not send.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "actors/core/job_event.hpp"
#include "actors/metrics/metrics.hpp"
#include "actors/metrics/metrics_http.hpp"
#include "cli_run.hpp"  // wait_until
#include "connection_flood.hpp"
#include "scrape.hpp"

using namespace keel;
using namespace keel::test;

namespace {

// A server on an OS-picked port whose page counts the times it was rendered.
struct counting_server {
  std::atomic<int> renders{0};
  std::unique_ptr<metrics_http_server> server;

  explicit counting_server(const metrics_http_options& options = {}) {
    std::string error;
    server = metrics_http_server::start(
        options, [this] { return page(++renders); }, error);
    REQUIRE_MESSAGE(server, error);
    REQUIRE(server->port() != 0);
  }
  static std::string page(int n) {
    return "# HELP test_renders Times rendered.\n# TYPE test_renders counter\ntest_renders " +
           std::to_string(n) + "\n";
  }
  std::string url(const std::string& path = "/metrics") const {
    return "http://127.0.0.1:" + std::to_string(server->port()) + path;
  }
};

// Lines a server logs, kept for the test (the server's thread writes them).
struct log_lines {
  std::mutex mtx;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> guard(mtx);
      lines.push_back(l);
    };
  }
  bool has(const std::string& text) {
    std::lock_guard<std::mutex> guard(mtx);
    for (auto& l : lines)
      if (l.find(text) != std::string::npos)
        return true;
    return false;
  }
};

bool has_header(const http_reply& r, const std::string& header) {
  return r.headers.find("\r\n" + header + "\r\n") != std::string::npos;
}

}  // namespace

TEST_CASE("GET /metrics answers 200 with the rendered exposition, as Prometheus text 0.0.4") {
  counting_server s;
  auto r = curl(s.url());
  CAPTURE(r.raw);
  CHECK(r.status == 200);
  CHECK(has_header(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
  CHECK(has_header(r, "Content-Length: " + std::to_string(r.body.size())));
  auto e = read_exposition(r.body);
  CHECK_MESSAGE(e.error.empty(), e.error);
  CHECK(e.at("test_renders") == 1);
  // Each scrape renders afresh; a query string does not change the page.
  CHECK(read_exposition(curl(s.url("/metrics?x=1")).body).at("test_renders") == 2);
}

TEST_CASE("a registry served over HTTP reads back as the exposition it renders") {
  metrics_registry reg;
  auto e = make_job_event(event_kind::restart, "shard:0", "");
  reg.observe(e);
  std::string error;
  auto server = metrics_http_server::start(
      {}, [&reg] { return to_prometheus(reg.families()); }, error);
  REQUIRE_MESSAGE(server, error);
  auto r = curl("http://127.0.0.1:" + std::to_string(server->port()) + "/metrics");
  REQUIRE(r.status == 200);
  CHECK(r.body == to_prometheus(reg.families()));
  auto parsed = read_exposition(r.body);
  CHECK_MESSAGE(parsed.error.empty(), parsed.error);
  CHECK(parsed.at("keel_restarts_total{actor=\"shard:0\"}") == 1);
}

TEST_CASE("other paths answer 404 and other methods 405 with Allow: GET") {
  counting_server s;
  CHECK(curl(s.url("/")).status == 404);
  CHECK(curl(s.url("/metrics/extra")).status == 404);
  CHECK(curl(s.url("/metricsX")).status == 404);
  auto post = curl(s.url(), "-X POST -d x=1");
  CHECK(post.status == 405);
  CHECK(has_header(post, "Allow: GET"));
  CHECK(curl(s.url(), "-X DELETE").status == 405);
  CHECK(curl(s.url(), "--head").status == 405);
  CHECK(s.renders == 0);  // none of them rendered the page
}

TEST_CASE(
    "garbage, a bad request line and an oversized head get 400, and the server keeps serving") {
  counting_server s;
  auto port = s.server->port();
  std::string garbage("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n", 13);  // a TLS hello, say
  CHECK(raw_request(port, garbage).status == 400);
  CHECK(raw_request(port, "GET /metrics\r\n\r\n").status == 400);  // no version
  CHECK(raw_request(port, "GET /metrics HTTP/2.0\r\n\r\n").status == 400);
  CHECK(raw_request(port, "GET  /metrics HTTP/1.1\r\n\r\n").status == 400);
  CHECK(raw_request(port, "G(T /metrics HTTP/1.1\r\n\r\n").status == 400);
  CHECK(curl(s.url(), "--request-target 'metrics'").status == 400);  // not origin-form
  auto huge =
      raw_request(port, "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(20000, 'a') + "\r\n\r\n");
  CHECK(huge.status == 400);
  CHECK(huge.body.find("exceeds") != std::string::npos);
  // Closed before the head ended: 400, not a hang.
  CHECK(raw_request(port, "GET /metrics HTTP/1.1\r\nHost: x").status == 400);
  // Connected and closed without a byte: no answer, no harm.
  CHECK(raw_request(port, "").status == 0);
  CHECK(s.renders == 0);
  auto ok = curl(s.url());
  CHECK(ok.status == 200);
  CHECK(read_exposition(ok.body).at("test_renders") == 1);
}

TEST_CASE("a lenient client's bare newlines are a request head too") {
  counting_server s;
  auto r = raw_request(s.server->port(), "GET /metrics HTTP/1.0\n\n");
  CHECK(r.status == 200);
  CHECK(read_exposition(r.body).at("test_renders") == 1);
}

TEST_CASE("a client that connects and sends nothing does not keep others from being served") {
  counting_server s;
  int idle = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(idle >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(s.server->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(idle, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  CHECK(curl(s.url()).status == 200);
  CHECK(curl(s.url()).status == 200);
  ::close(idle);
}

TEST_CASE("the pure response: every branch without a socket") {
  auto render = [] { return std::string("x 1\n"); };
  CHECK(metrics_http_response("GET /metrics HTTP/1.1\r\nHost: a\r\n", render)
            .rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(metrics_http_response("GET /metrics?a=b HTTP/1.0", render).rfind("HTTP/1.1 200", 0) == 0);
  CHECK(metrics_http_response("GET /other HTTP/1.1", render).rfind("HTTP/1.1 404", 0) == 0);
  CHECK(metrics_http_response("PUT /metrics HTTP/1.1", render).rfind("HTTP/1.1 405", 0) == 0);
  CHECK(metrics_http_response("", render).rfind("HTTP/1.1 400", 0) == 0);
  CHECK(metrics_http_response("GET /metrics HTTP/1.1 extra", render).rfind("HTTP/1.1 400", 0) == 0);
  CHECK(metrics_http_response("GET /met\x01rics HTTP/1.1", render).rfind("HTTP/1.1 400", 0) == 0);
  auto failing = []() -> std::string { throw std::runtime_error("registry gone"); };
  auto r = metrics_http_response("GET /metrics HTTP/1.1", failing);
  CHECK(r.rfind("HTTP/1.1 500", 0) == 0);
  CHECK(r.find("registry gone") != std::string::npos);
}

TEST_CASE("a port in use and an address that is not an IP are errors naming them") {
  counting_server s;
  std::string error;
  metrics_http_options same;
  same.port = s.server->port();
  CHECK(!metrics_http_server::start(
      same, [] { return std::string(); }, error));
  CAPTURE(error);
  CHECK(error.find("127.0.0.1:" + std::to_string(same.port)) != std::string::npos);
  CHECK(error.find("in use") != std::string::npos);
  metrics_http_options bad;
  bad.address = "localhost:80";
  error.clear();
  CHECK(!metrics_http_server::start(
      bad, [] { return std::string(); }, error));
  CHECK(error == "metrics address 'localhost:80' is not an IP address");
}

TEST_CASE("destroying the server joins its thread and frees its port") {
  uint16_t port = 0;
  {
    counting_server s;
    port = s.server->port();
    CHECK(curl(s.url()).status == 200);
  }
  // The port is free again: a new server binds it.
  std::string error;
  metrics_http_options again;
  again.port = port;
  auto s2 = metrics_http_server::start(
      again, [] { return std::string("a 1\n"); }, error);
  REQUIRE_MESSAGE(s2, error);
  CHECK(s2->port() == port);
  auto r = curl("http://127.0.0.1:" + std::to_string(port) + "/metrics");
  CHECK(r.body == "a 1\n");
}

namespace {

// Whether the server closed `fd`: recv sees its end (or a reset) within `timeout`.
bool closed_by_server(int fd, std::chrono::milliseconds timeout) {
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[512];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0)
      continue;  // what it said before closing
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

// Whether `fd` is still open with nothing to read (recv would block).
bool still_open(int fd) {
  char buf[1];
  auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

TEST_CASE("a connection beyond the cap takes the slot of the oldest idle one, logged with both addresses, and is served") {
  log_lines log;
  metrics_http_options o;
  o.max_connections = 4;
  o.eviction_grace = std::chrono::milliseconds(50);
  o.log = log.sink();
  std::string error;
  auto server = metrics_http_server::start(o, [] { return std::string("x 1\n"); }, error);
  REQUIRE_MESSAGE(server, error);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(connect_loopback(server->port()));
    REQUIRE(wait_until([&] { return server->stats().accepted == idle.size(); }, std::chrono::seconds(10)));
  }
  auto newer = raw_request(server->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  CHECK(newer.status == 200);
  CHECK(newer.body == "x 1\n");
  CHECK(closed_by_server(idle[0], std::chrono::seconds(5)));
  for (size_t i = 1; i < idle.size(); ++i) CHECK(still_open(idle[i]));
  CHECK(server->stats().evicted == 1);
  CHECK(server->stats().refused == 0);
  CHECK(log.has("closed a connection from 127.0.0.1:"));
  CHECK(log.has("to port " + std::to_string(server->port()) + " for a newer one from 127.0.0.1:"));
  CHECK(log.has("4 connections are open (the limit)"));
  for (int fd : idle) ::close(fd);
}

TEST_CASE("a flood of idle connections, reopened as fast as they are closed, does not keep a scrape of /metrics out") {
  // Issue 40: 64 idle connections, each reopened as it closed, made every
  // scrape fail (a connection beyond the cap was closed on accept, and an
  // idle one held its slot for seconds).
  log_lines log;
  metrics_http_options o;  // at most 64 connections
  o.log = log.sink();
  counting_server s(o);
  connection_flood flood(s.server->port(), 80);
  REQUIRE(wait_until([&] { return flood.reopened() >= 80; }, std::chrono::seconds(20)));
  for (int i = 1; i <= 3; ++i) {
    auto r = curl(s.url());
    CHECK(r.status == 200);
    CHECK(read_exposition(r.body).at("test_renders") == i);
  }
  CHECK(s.server->stats().evicted >= 80);
  CHECK(log.has("64 connections are open (the limit)"));
}

TEST_CASE("a connection answered 408 gives up its slot at once") {
  metrics_http_options o;
  o.max_connections = 1;
  o.read_timeout = std::chrono::milliseconds(200);
  o.eviction_grace = std::chrono::seconds(30);  // no eviction frees it
  std::string error;
  auto server = metrics_http_server::start(o, [] { return std::string("x 1\n"); }, error);
  REQUIRE_MESSAGE(server, error);
  int idle = connect_loopback(server->port());
  timeval tv{5, 0};
  ::setsockopt(idle, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[512];
  auto n = ::recv(idle, buf, sizeof buf, 0);
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)).find("408") != std::string::npos);
  // The idle client has not closed its end; the server has.
  auto r = raw_request(server->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  CHECK(r.status == 200);
  CHECK(server->stats().evicted == 0);
  CHECK(server->stats().refused == 0);
  ::close(idle);
}

TEST_CASE("a connection that would leave fewer descriptors than the reserve is closed on accept, so the job keeps its own") {
  log_lines log;
  // The reserve is set so that descriptors past the next ten or so count
  // as the job's: accept returns the lowest free descriptor, so once the
  // ones below are taken the server must refuse.
  int probe = ::dup(0);
  REQUIRE(probe >= 0);
  ::close(probe);
  rlimit r{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &r) == 0);
  metrics_http_options o;
  o.max_connections = 1000;
  o.descriptor_reserve = static_cast<size_t>(r.rlim_cur) - static_cast<size_t>(probe) - 12;
  o.log = log.sink();
  std::string error;
  auto server = metrics_http_server::start(o, [] { return std::string("x 1\n"); }, error);
  REQUIRE_MESSAGE(server, error);
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(connect_loopback(server->port()));
  CHECK(wait_until([&] { return server->stats().accepted + server->stats().refused == 20; }, std::chrono::seconds(10)));
  CHECK(server->stats().refused > 0);
  CHECK(server->stats().accepted < 12);
  CHECK(log.has("descriptors would be left for the job"));
  for (int fd : idle) ::close(fd);
}

TEST_CASE("a request head that does not arrive within the read timeout is answered 408 and closed") {
  metrics_http_options o;
  o.read_timeout = std::chrono::milliseconds(200);
  std::string error;
  auto server = metrics_http_server::start(o, [] { return std::string("x 1\n"); }, error);
  REQUIRE_MESSAGE(server, error);
  int fd = connect_loopback(server->port());
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[512];
  auto started = std::chrono::steady_clock::now();
  auto n = ::recv(fd, buf, sizeof buf, 0);
  auto waited = std::chrono::steady_clock::now() - started;
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)).find("408") != std::string::npos);
  CHECK(waited < std::chrono::seconds(2));
  ::close(fd);
}
