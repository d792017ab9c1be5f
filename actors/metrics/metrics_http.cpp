// The metrics endpoint on Boost.Asio: one io_context run by one thread,
// asynchronous accept, read, write and a deadline per connection, so that
// a slow or hostile client holds only its own socket.
#include "actors/metrics/metrics_http.hpp"

#include <sys/resource.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <iostream>
#include <thread>

#include "actors/net/rate_limited_log.hpp"

namespace keel {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr auto linger_deadline = std::chrono::seconds(2);

std::string response(const std::string& status, const std::string& content_type,
                     const std::string& body, const std::string& extra_headers = {}) {
  return http_response(status, content_type, body, extra_headers);
}

std::string plain(const std::string& status, const std::string& why,
                  const std::string& extra_headers = {}) {
  return http_plain(status, why, extra_headers);
}

bool is_token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '!' || c == '~' || c == '*' || c == '+';
}

}  // namespace

std::string http_response(const std::string& status, const std::string& content_type,
                          const std::string& body, const std::string& extra_headers) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers +
         "Connection: close\r\n\r\n" + body;
}

std::string http_plain(const std::string& status, const std::string& why, const std::string& extra_headers) {
  return http_response(status, "text/plain; charset=utf-8", why + "\n", extra_headers);
}

bool parse_request_line(const std::string& line, std::string& method, std::string& target) {
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos)
    return false;
  method = line.substr(0, sp1);
  target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = line.substr(sp2 + 1);
  for (char c : method)
    if (!is_token_char(c))
      return false;
  for (unsigned char c : target)
    if (c <= 0x20 || c >= 0x7f)
      return false;
  return !target.empty() && target[0] == '/' && (version == "HTTP/1.1" || version == "HTTP/1.0");
}

bool parse_request_head(const std::string& head, std::string& method, std::string& target) {
  auto line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  return parse_request_line(line, method, target);
}

namespace {

using head_iterator = asio::buffers_iterator<asio::streambuf::const_buffers_type>;

// The end of a request head: a blank line ("\r\n\r\n", or "\n\n" from a
// lenient client).
std::pair<head_iterator, bool> end_of_head(head_iterator begin, head_iterator end) {
  for (auto i = begin; i != end; ++i) {
    if (*i != '\n')
      continue;
    auto j = std::next(i);
    if (j != end && *j == '\r')
      ++j;
    if (j != end && *j == '\n')
      return {std::next(j), true};
  }
  return {begin, false};
}

class connection : public std::enable_shared_from_this<connection> {
 public:
  // `open` counts the live connections; it outlives them (see impl).
  connection(tcp::socket s, const http_responder& respond, size_t max_head_bytes, size_t& open)
      : socket_(std::move(s)),
        timer_(socket_.get_executor()),
        buf_(max_head_bytes),
        max_head_bytes_(max_head_bytes),
        respond_(respond),
        open_(open) {
    ++open_;
  }
  ~connection() { --open_; }

  void start(std::chrono::milliseconds read_timeout) {
    auto self = shared_from_this();
    timer_.expires_after(read_timeout);
    timer_.async_wait([self](boost::system::error_code ec) {
      if (!ec)
        self->answer(plain("408 Request Timeout", "the request head did not arrive in time"));
    });
    asio::async_read_until(
        socket_, buf_, end_of_head,
        [self](boost::system::error_code ec, size_t n) { self->on_head(ec, n); });
  }

 private:
  void on_head(boost::system::error_code ec, size_t n) {
    if (ec == asio::error::operation_aborted || answered_)
      return;
    if (!ec) {
      std::string head(asio::buffers_begin(buf_.data()), asio::buffers_begin(buf_.data()) + n);
      return answer(respond_(head));
    }
    if (ec == asio::error::not_found)
      return answer(plain("400 Bad Request",
                          "the request head exceeds " + std::to_string(max_head_bytes_) + " bytes"));
    if (ec == asio::error::eof && buf_.size() > 0)
      return answer(
          plain("400 Bad Request", "the connection closed before the request head ended"));
    close();  // gone without a request
  }

  void answer(std::string text) {
    if (answered_)
      return;
    answered_ = true;
    out_ = std::move(text);
    boost::system::error_code ignored;
    socket_.cancel(ignored);  // a read still pending ends now
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_), [self](boost::system::error_code ec, size_t) {
      if (ec)
        return self->close();
      // Closing with unread bytes in the socket would send a reset, which
      // can destroy the response before the client reads it: say we are
      // done, then read what the client still sends until it closes (or
      // the deadline, reset here, passes).
      boost::system::error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
      self->timer_.expires_after(linger_deadline);
      self->timer_.async_wait([self](boost::system::error_code e) {
        if (!e)
          self->close();
      });
      self->drain();
    });
  }

  void drain() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(scratch_), [self](boost::system::error_code ec, size_t) {
      if (ec)
        return self->close();
      self->drain();
    });
  }

  void close() {
    boost::system::error_code ignored;
    timer_.cancel(ignored);
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  asio::streambuf buf_;
  size_t max_head_bytes_;
  const http_responder& respond_;
  size_t& open_;
  std::string out_;
  std::array<char, 4096> scratch_;
  bool answered_ = false;
};

}  // namespace

std::string metrics_http_response(const std::string& request_head,
                                  const std::function<std::string()>& render) {
  std::string method, target;
  if (!parse_request_head(request_head, method, target))
    return plain("400 Bad Request", "not an HTTP/1.x request line: expected METHOD /PATH HTTP/1.1");
  auto path = target.substr(0, target.find('?'));
  if (path != "/metrics")
    return plain("404 Not Found", "keel serves /metrics only");
  if (method != "GET")
    return plain("405 Method Not Allowed", "/metrics answers GET only", "Allow: GET\r\n");
  try {
    return response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render());
  } catch (const std::exception& e) {
    return plain("500 Internal Server Error",
                 std::string("rendering the metrics failed: ") + e.what());
  }
}

struct metrics_http_server::impl {
  // Outlive the connections, whose handlers the io_context destroys
  // (declared before it).
  http_responder respond;
  size_t open = 0;  // live connections; the io thread's only
  metrics_http_options options;
  rate_limited_log refusals;
  std::string address;
  uint16_t port = 0;  // as bound, read from any thread
  std::atomic<uint64_t> accepted{0}, refused{0};
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  asio::steady_timer summary{io};  // writes the count of refusals not logged one by one
  std::thread thread;

  explicit impl(metrics_http_options o)
      : options(std::move(o)),
        refusals(options.log, 20, std::chrono::milliseconds(1000), "refused connections") {}

  void refuse(const std::string& why) {
    ++refused;
    auto now = std::chrono::steady_clock::now();
    refusals(why, now);
    auto at = refusals.next_flush();
    if (at == std::chrono::steady_clock::time_point::max())
      return;
    summary.expires_at(at);
    summary.async_wait([this](boost::system::error_code e) {
      if (!e)
        refusals.flush(std::chrono::steady_clock::now());
    });
  }

  // Why `s` may not be served now, or empty.
  std::string over_limit(tcp::socket& s) {
    if (open >= options.max_connections)
      return std::to_string(open) + " connections are open (the limit)";
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
        static_cast<rlim_t>(s.native_handle()) + options.descriptor_reserve >= r.rlim_cur)
      return "fewer than " + std::to_string(options.descriptor_reserve) +
             " descriptors would be left for the job (limit " + std::to_string(r.rlim_cur) + ")";
    return {};
  }

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted)
        return;
      if (!ec) {
        auto why = over_limit(s);
        if (why.empty()) {
          ++accepted;
          std::make_shared<connection>(std::move(s), respond, options.max_request_bytes, open)
              ->start(options.read_timeout);
        } else {
          boost::system::error_code ignored;
          auto from = s.remote_endpoint(ignored);
          refuse("refused a connection from " + from.address().to_string() + ":" +
                 std::to_string(from.port()) + " to port " + std::to_string(port) + ": " + why);
          s.close(ignored);
        }
        return accept();
      }
      // Out of descriptors, say: try again soon rather than spin.
      refuse("cannot accept on port " + std::to_string(port) + ": " + ec.message());
      retry.expires_after(std::chrono::milliseconds(100));
      retry.async_wait([this](boost::system::error_code e) {
        if (!e)
          accept();
      });
    });
  }

  void run() {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {
        std::cerr << "keel " << options.name << ": a connection failed: " << e.what() << "\n";
      }
    }
  }
};

std::unique_ptr<metrics_http_server> metrics_http_server::start(const metrics_http_options& options,
                                                                std::function<std::string()> render,
                                                                std::string& error) {
  return serve(
      options, [render = std::move(render)](const std::string& head) { return metrics_http_response(head, render); },
      error);
}

std::unique_ptr<metrics_http_server> metrics_http_server::serve(const metrics_http_options& options,
                                                                http_responder respond, std::string& error) {
  if (options.max_connections == 0 || options.read_timeout.count() <= 0 ||
      options.max_request_bytes < 64) {
    error = options.name + " server: the connection cap and the read timeout must be positive, and the "
            "request limit at least 64 bytes";
    return nullptr;
  }
  auto o = options;
  if (!o.log)
    o.log = [name = o.name](const std::string& line) { std::cerr << "keel " + name + ": " + line + "\n" << std::flush; };
  auto p = std::make_unique<impl>(std::move(o));
  p->respond = std::move(respond);
  p->address = options.address;
  auto where = options.name + " address " + options.address + ":" + std::to_string(options.port);
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(options.address, ec);
  if (ec) {
    error = options.name + " address '" + options.address + "' is not an IP address";
    return nullptr;
  }
  tcp::endpoint ep(ip, options.port);
  p->acceptor.open(ep.protocol(), ec);
  if (!ec)
    p->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    p->acceptor.bind(ep, ec);
  if (!ec)
    p->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error = where + ": " + ec.message();
    return nullptr;
  }
  p->port = p->acceptor.local_endpoint(ec).port();
  if (ec) {
    error = where + ": " + ec.message();
    return nullptr;
  }
  p->accept();
  auto* raw = p.get();
  p->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<metrics_http_server>(new metrics_http_server(std::move(p)));
}

metrics_http_server::metrics_http_server(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

metrics_http_server::~metrics_http_server() {
  impl_->io.stop();
  if (impl_->thread.joinable())
    impl_->thread.join();
}

uint16_t metrics_http_server::port() const {
  return impl_->port;
}

const std::string& metrics_http_server::address() const {
  return impl_->address;
}

metrics_http_stats metrics_http_server::stats() const {
  return {impl_->accepted, impl_->refused};
}

}  // namespace keel
