// The bounded HTTP server of keel's metrics and admin endpoints on
// Boost.Asio: one io_context run by one thread, asynchronous accept, read,
// write and a deadline per connection, so that a slow or hostile client
// holds only its own socket, and slots given way as connection_slots says.
#include "actors/metrics/metrics_http.hpp"

#include <sys/resource.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "actors/net/connection_slots.hpp"
#include "actors/net/rate_limited_log.hpp"

namespace keel {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr auto linger_deadline = std::chrono::seconds(2);

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

std::string peer_of(const tcp::socket& s) {
  boost::system::error_code ignored;
  auto from = s.remote_endpoint(ignored);
  return from.address().to_string() + ":" + std::to_string(from.port());
}

class connection;

// What the server's connections share with it; outlives them (see impl).
struct server_state {
  http_responder respond;
  std::chrono::milliseconds read_timeout;
  size_t max_head_bytes;
  connection_slots slots;
  std::map<connection_slots::slot_id, std::weak_ptr<connection>> live;  // to close a victim
  std::function<void()> slot_changed;  // a slot was released or may now give way
  bool closing = false;                // the server is being destroyed: slot_changed is gone

  void changed() {
    if (!closing && slot_changed)
      slot_changed();
  }
  void release(connection_slots::slot_id id) {
    if (live.erase(id) == 0)
      return;
    slots.release(id);
    changed();
  }
};

class connection : public std::enable_shared_from_this<connection> {
 public:
  connection(tcp::socket s, server_state& state, connection_slots::slot_id id)
      : peer_(peer_of(s)),
        socket_(std::move(s)),
        timer_(socket_.get_executor()),
        buf_(state.max_head_bytes),
        state_(state),
        id_(id) {}
  ~connection() { state_.release(id_); }

  void start() {
    arm(state_.read_timeout);
    auto self = shared_from_this();
    asio::async_read_until(
        socket_, buf_, end_of_head,
        [self](boost::system::error_code ec, size_t n) { self->on_head(ec, n); });
  }

  // The client's address and port.
  const std::string& peer() const { return peer_; }

  // Closes the connection now and frees its slot (a newer one takes it).
  void close() {
    closed_ = true;
    boost::system::error_code ignored;
    timer_.cancel(ignored);
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    state_.release(id_);
  }

 private:
  // The one deadline: for the request head (then 408), for writing the
  // response, then for the client to close after it.
  void arm(std::chrono::milliseconds after) {
    auto self = shared_from_this();
    timer_.expires_after(after);
    timer_.async_wait([self](boost::system::error_code ec) {
      if (ec || self->closed_)
        return;
      if (!self->answered_)
        return self->answer(
            http_plain("408 Request Timeout", "the request head did not arrive in time"), false);
      self->close();
    });
  }

  void on_head(boost::system::error_code ec, size_t n) {
    if (ec == asio::error::operation_aborted || answered_ || closed_)
      return;
    if (!ec) {
      std::string head(asio::buffers_begin(buf_.data()), asio::buffers_begin(buf_.data()) + n);
      return answer(state_.respond(head), true);
    }
    if (ec == asio::error::not_found)
      return answer(
          http_plain("400 Bad Request", "the request head exceeds " +
                                            std::to_string(state_.max_head_bytes) + " bytes"),
          true);
    if (ec == asio::error::eof && buf_.size() > 0)
      return answer(
          http_plain("400 Bad Request", "the connection closed before the request head ended"),
          true);
    close();  // gone without a request
  }

  // Writes `text`; then closes at once (`linger` false: a 408, whose client
  // sent no request worth waiting for), or says it is done and waits for
  // the client to close, holding a slot that gives way to any newer
  // connection.
  void answer(std::string text, bool linger) {
    if (answered_)
      return;
    answered_ = true;
    out_ = std::move(text);
    state_.slots.writing(id_);
    boost::system::error_code ignored;
    socket_.cancel(ignored);   // a read still pending ends now
    arm(state_.read_timeout);  // a client that does not read its response
    auto self = shared_from_this();
    asio::async_write(
        socket_, asio::buffer(out_),
        [self, linger](boost::system::error_code ec, size_t) { self->on_written(ec, linger); });
  }

  void on_written(boost::system::error_code ec, bool linger) {
    if (closed_)
      return;
    if (ec || !linger)
      return close();
    // Closing with unread bytes in the socket would send a reset, which
    // can destroy the response before the client reads it: say we are
    // done, then read what the client still sends until it closes (or the
    // deadline passes, or a newer connection needs the slot).
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    state_.slots.written(id_);
    state_.changed();
    arm(linger_deadline);
    drain();
  }

  void drain() {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(scratch_), [self](boost::system::error_code ec, size_t) {
      if (self->closed_)
        return;
      if (ec)
        return self->close();
      self->drain();
    });
  }

  std::string peer_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  asio::streambuf buf_;
  server_state& state_;
  connection_slots::slot_id id_;
  std::string out_;
  std::array<char, 4096> scratch_;
  bool answered_ = false;
  bool closed_ = false;
};

}  // namespace

struct metrics_http_server::impl {
  // Outlives the connections, whose handlers the io_context destroys
  // (declared before it).
  server_state state;
  metrics_http_options options;
  rate_limited_log refusals;
  std::string address;
  uint16_t port = 0;  // as bound, read from any thread
  std::atomic<uint64_t> accepted{0}, refused{0}, evicted{0};
  bool accepting = false;  // an accept is under way
  bool paused = false;     // no slot now: resumed by `retry` or a slot's change
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  asio::steady_timer summary{io};  // writes the count of refusals not logged one by one
  std::thread thread;

  explicit impl(metrics_http_options o)
      : state{{},
              o.read_timeout,
              o.max_request_bytes,
              connection_slots(o.max_connections, o.eviction_grace),
              {},
              {}},
        options(std::move(o)),
        refusals(options.log, 20, std::chrono::milliseconds(1000), "refused connections") {
    state.slot_changed = [this] { resume(); };
  }

  void log(const std::string& line) {
    auto now = std::chrono::steady_clock::now();
    refusals(line, now);
    auto at = refusals.next_flush();
    if (at == std::chrono::steady_clock::time_point::max())
      return;
    summary.expires_at(at);
    summary.async_wait([this](boost::system::error_code e) {
      if (!e)
        refusals.flush(std::chrono::steady_clock::now());
    });
  }

  void refuse(const std::string& from, const std::string& why) {
    ++refused;
    log("refused a connection from " + from + " to port " + std::to_string(port) + ": " + why);
  }

  // Accepts the next connection once the slots have room for it.
  void accept() {
    if (accepting)
      return;
    auto next = state.slots.next(std::chrono::steady_clock::now());
    if (next.what == connection_slots::decision::action::wait) {
      // Newer connections wait in the listen backlog, in order, holding
      // none of our descriptors.
      paused = true;
      if (next.retry_at != connection_slots::clock::time_point::max()) {
        retry.expires_at(next.retry_at);
        retry.async_wait([this](boost::system::error_code e) {
          if (!e)
            resume();
        });
      }
      return;
    }
    accepting = true;
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      accepting = false;
      if (ec == asio::error::operation_aborted)
        return;
      if (!ec) {
        take(std::move(s));
        return accept();
      }
      // Out of descriptors, say: try again soon rather than spin.
      ++refused;
      log("cannot accept on port " + std::to_string(port) + ": " + ec.message());
      retry.expires_after(std::chrono::milliseconds(100));
      retry.async_wait([this](boost::system::error_code e) {
        if (!e)
          accept();
      });
    });
  }

  void resume() {
    if (!paused)
      return;
    paused = false;
    boost::system::error_code ignored;
    retry.cancel(ignored);
    accept();
  }

  // Serves `s`, in the slot of the connection that gives way to it if the
  // slots are full.
  void take(tcp::socket s) {
    boost::system::error_code ignored;
    auto from = peer_of(s);
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
        static_cast<rlim_t>(s.native_handle()) + options.descriptor_reserve >= r.rlim_cur) {
      refuse(from, "fewer than " + std::to_string(options.descriptor_reserve) +
                       " descriptors would be left for the job (limit " +
                       std::to_string(r.rlim_cur) + ")");
      s.close(ignored);
      return;
    }
    auto now = std::chrono::steady_clock::now();
    auto next = state.slots.next(now);
    // Rare: the victim chosen when the accept began is answering a request now.
    if (next.what == connection_slots::decision::action::wait) {
      refuse(from, std::to_string(state.slots.open()) +
                       " connections are open (the limit), none of them idle");
      s.close(ignored);
      return;
    }
    if (next.what == connection_slots::decision::action::evict_then_admit)
      evict(next.victim, from);
    ++accepted;
    auto id = state.slots.add(now);
    auto c = std::make_shared<connection>(std::move(s), state, id);
    state.live[id] = c;
    c->start();
  }

  void evict(connection_slots::slot_id victim, const std::string& newer) {
    ++evicted;
    auto it = state.live.find(victim);
    auto c = it == state.live.end() ? nullptr : it->second.lock();
    if (!c)
      return state.release(victim);
    log("closed a connection from " + c->peer() + " to port " + std::to_string(port) +
        " for a newer one from " + newer + ": " + std::to_string(state.slots.open()) +
        " connections are open (the limit), and it was the oldest with no response being written");
    c->close();
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
      options,
      [render = std::move(render)](const std::string& head) {
        return metrics_http_response(head, render);
      },
      error);
}

std::unique_ptr<metrics_http_server> metrics_http_server::serve(const metrics_http_options& options,
                                                                http_responder respond,
                                                                std::string& error) {
  if (options.max_connections == 0 || options.read_timeout.count() <= 0 ||
      options.eviction_grace.count() < 0 || options.max_request_bytes < 64) {
    error = options.name +
            " server: the connection cap and the read timeout must be positive, the eviction "
            "grace not negative, and the request limit at least 64 bytes";
    return nullptr;
  }
  auto o = options;
  if (!o.log)
    o.log = [name = o.name](const std::string& line) {
      std::cerr << "keel " + name + ": " + line + "\n" << std::flush;
    };
  auto p = std::make_unique<impl>(std::move(o));
  p->state.respond = std::move(respond);
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
  impl_->state.closing =
      true;  // the connections the io_context still holds go without resuming accepts
}

uint16_t metrics_http_server::port() const {
  return impl_->port;
}

const std::string& metrics_http_server::address() const {
  return impl_->address;
}

metrics_http_stats metrics_http_server::stats() const {
  return {impl_->accepted, impl_->refused, impl_->evicted};
}

}  // namespace keel
