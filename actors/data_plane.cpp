#include "actors/data_plane.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "actors/data_plane_wire.hpp"
#include "messages/errors.hpp"
#include "messages/protocol.hpp"

namespace keel {

namespace {

using dp_request_atom = caf::atom_constant<caf::atom("dp_req")>;     // (slot, shard, msg) to a gateway
using dp_reply_atom = caf::atom_constant<caf::atom("dp_reply")>;     // (slot, answer) to a forwarder
using dp_error_atom = caf::atom_constant<caf::atom("dp_error")>;     // (slot, text) to a forwarder
using dp_closed_atom = caf::atom_constant<caf::atom("dp_closed")>;   // (why) to a forwarder
using steady = std::chrono::steady_clock;

struct outgoing {
  dp::header h;
  frame_ptr f;  // or, for kind::error, the text
  std::string text;
};

// One TCP connection and its two threads: the writer drains `queue`, the
// reader delivers what arrives to `actor` (a forwarder for an outbound
// connection, a gateway for an inbound one).
struct connection {
  enum class phase { connecting, open, closed };

  bool outbound = false;
  std::string peer;  // node id: the route's (outbound) or the handshake's (inbound)
  std::string host;  // outbound: where it connects
  uint16_t port = 0;
  caf::actor actor;  // set before the threads start
  std::thread writer, reader;
  std::atomic<int> running{2};  // threads not finished yet

  std::mutex mtx;
  std::condition_variable cv;
  phase ph = phase::connecting;
  dp::socket_fd fd;
  std::deque<outgoing> queue;
  std::string why;  // why it closed
  steady::time_point closed_at;

  std::string name() const {
    return "node " + (peer.empty() ? std::string("(not yet known)") : peer) +
           (outbound ? " at " + host + ":" + std::to_string(port) : std::string());
  }

  bool enqueue(outgoing o) {
    std::lock_guard<std::mutex> guard(mtx);
    if (ph == phase::closed)
      return false;
    queue.push_back(std::move(o));
    cv.notify_all();
    return true;
  }

  // False when the connection closed meanwhile (the socket is then dropped).
  bool adopt(dp::socket_fd s) {
    std::lock_guard<std::mutex> guard(mtx);
    if (ph == phase::closed)
      return false;
    fd = std::move(s);
    return true;
  }

  bool open() {
    std::lock_guard<std::mutex> guard(mtx);
    if (ph != phase::connecting)
      return false;
    ph = phase::open;
    cv.notify_all();
    return true;
  }

  // Waits until the handshake ended; true when it succeeded.
  bool wait_open() {
    std::unique_lock<std::mutex> lk(mtx);
    cv.wait(lk, [&] { return ph != phase::connecting; });
    return ph == phase::open;
  }

  bool is_closed(steady::time_point* when = nullptr) {
    std::lock_guard<std::mutex> guard(mtx);
    if (when)
      *when = closed_at;
    return ph == phase::closed;
  }

  // True for the call that closed it. Wakes both threads.
  bool close(const std::string& reason) {
    std::lock_guard<std::mutex> guard(mtx);
    if (ph == phase::closed)
      return false;
    ph = phase::closed;
    why = reason;
    closed_at = steady::now();
    queue.clear();
    fd.shutdown();
    cv.notify_all();
    return true;
  }

  // The next item to write; false once closed.
  bool next(outgoing& o) {
    std::unique_lock<std::mutex> lk(mtx);
    cv.wait(lk, [&] { return ph == phase::closed || !queue.empty(); });
    if (ph == phase::closed)
      return false;
    o = std::move(queue.front());
    queue.pop_front();
    return true;
  }

  int socket() {
    std::lock_guard<std::mutex> guard(mtx);
    return fd.get();
  }
};

using connection_ptr = std::shared_ptr<connection>;

}  // namespace

struct data_plane::impl {
  impl(caf::actor_system& s, data_plane_config c) : sys(s), cfg(std::move(c)), node(to_string(s.node())) {}

  caf::actor_system& sys;
  data_plane_config cfg;
  std::string node;
  uint16_t port = 0;
  dp::socket_fd listener;
  std::thread acceptor;

  std::mutex mtx;
  bool stopping = false;
  std::map<std::string, std::pair<std::string, uint16_t>> routes;  // node -> host, port
  std::map<std::string, connection_ptr> out;                       // node -> its connection
  std::vector<connection_ptr> all;                                 // every connection with threads
  std::unordered_map<caf::actor_id, caf::actor> served;

  std::atomic<uint64_t> connections_out{0}, connections_in{0}, refused{0}, requests_out{0}, requests_in{0},
    bytes_out{0}, bytes_in{0};

  void log(const std::string& line) const {
    if (cfg.log)
      cfg.log(line);
    else
      std::cerr << "keel data plane: " + line + "\n";
  }

  caf::actor lookup(uint64_t id) {
    std::lock_guard<std::mutex> guard(mtx);
    auto it = served.find(id);
    return it == served.end() ? caf::actor{} : it->second;
  }

  // Closes `c` and tells its actor; the connection's threads end soon after.
  void close(const connection_ptr& c, const std::string& why) {
    if (!c->close(why))
      return;
    if (c->outbound)
      caf::anon_send(c->actor, dp_closed_atom::value, why);
    else
      caf::anon_send_exit(c->actor, caf::exit_reason::user_shutdown);
  }

  // Joins the threads of connections that closed and whose threads have
  // finished (a thread still running may be waiting for `mtx`).
  void reap_locked() {
    for (auto it = all.begin(); it != all.end();) {
      auto& c = *it;
      if (c->running.load() != 0) {
        ++it;
        continue;
      }
      c->writer.join();
      c->reader.join();
      it = all.erase(it);
    }
  }

  void start_threads(const connection_ptr& c);
  bool start(const connection_ptr& c);
  void write_loop(const connection_ptr& c);
  void read_requests(const connection_ptr& c);
  void read_answers(const connection_ptr& c);
  void accept_loop();
};

namespace {

// ---- the actors ----

struct forwarder_state {
  std::unordered_map<uint64_t, caf::typed_response_promise<push_ack_msg>> pushes;
  std::unordered_map<uint64_t, caf::typed_response_promise<pull_reply_msg>> pulls;
  uint64_t next_slot = 1;
  std::string closed;  // why, once the connection closed
};

using forwarder_actor = caf::stateful_actor<forwarder_state>;
using impl_ref = std::weak_ptr<data_plane::impl>;

caf::error lost(const std::string& peer, const std::string& why) {
  return make_error(errc::io_error, "data plane to " + peer + ": " + why);
}

// Queues one request on the connection; the slot's promise waits in
// `pending` for the answer. False (and nothing queued) when it is closed.
bool queue_request(forwarder_actor* self, const std::weak_ptr<connection>& wc, const impl_ref& wp, dp::kind k,
                   const caf::actor& dest, const frame_ptr& f, uint64_t& slot) {
  auto c = wc.lock();
  if (!c || !self->state.closed.empty())
    return false;
  slot = self->state.next_slot++;
  if (!c->enqueue(outgoing{dp::header{k, slot, dest.id(), 0}, f, {}}))
    return false;
  if (auto p = wp.lock())
    ++p->requests_out;
  return true;
}

template <class T>
void deliver(std::unordered_map<uint64_t, caf::typed_response_promise<T>>& pending, uint64_t slot, T answer) {
  auto it = pending.find(slot);
  if (it == pending.end())
    return;
  it->second.deliver(std::move(answer));
  pending.erase(it);
}

template <class Map>
bool fail_slot(Map& pending, uint64_t slot, const caf::error& err) {
  auto it = pending.find(slot);
  if (it == pending.end())
    return false;
  it->second.deliver(err);
  pending.erase(it);
  return true;
}

caf::behavior forwarder(forwarder_actor* self, std::weak_ptr<connection> wc, impl_ref wp, std::string peer) {
  return {
    [=](dp_forward_atom, const caf::actor& dest, const push_msg& m) -> caf::result<push_ack_msg> {
      if (m.empty() || !dest)
        return make_error(errc::invalid_argument, "data plane: an empty push or no destination");
      uint64_t slot = 0;
      if (!queue_request(self, wc, wp, dp::kind::push, dest, m.frame(), slot))
        return lost(peer, self->state.closed.empty() ? "closed" : self->state.closed);
      auto rp = self->make_response_promise<push_ack_msg>();
      self->state.pushes.emplace(slot, rp);
      return rp;
    },
    [=](dp_forward_atom, const caf::actor& dest, const pull_request_msg& m) -> caf::result<pull_reply_msg> {
      if (m.empty() || !dest)
        return make_error(errc::invalid_argument, "data plane: an empty pull or no destination");
      uint64_t slot = 0;
      if (!queue_request(self, wc, wp, dp::kind::pull, dest, m.frame(), slot))
        return lost(peer, self->state.closed.empty() ? "closed" : self->state.closed);
      auto rp = self->make_response_promise<pull_reply_msg>();
      self->state.pulls.emplace(slot, rp);
      return rp;
    },
    [=](dp_reply_atom, uint64_t slot, const push_ack_msg& a) { deliver(self->state.pushes, slot, a); },
    [=](dp_reply_atom, uint64_t slot, const pull_reply_msg& r) { deliver(self->state.pulls, slot, r); },
    [=](dp_error_atom, uint64_t slot, const std::string& text) {
      auto err = make_error(errc::io_error, "data plane: " + peer + " answered: " + text);
      if (!fail_slot(self->state.pushes, slot, err))
        fail_slot(self->state.pulls, slot, err);
    },
    [=](dp_closed_atom, const std::string& why) {
      auto& st = self->state;
      st.closed = why;
      auto err = lost(peer, why);
      for (auto& [slot, rp] : st.pushes) rp.deliver(err);
      for (auto& [slot, rp] : st.pulls) rp.deliver(err);
      st.pushes.clear();
      st.pulls.clear();
      self->quit();
    },
  };
}

void answer(const std::weak_ptr<connection>& wc, dp::kind k, uint64_t slot, const frame_ptr& f) {
  if (auto c = wc.lock())
    c->enqueue(outgoing{dp::header{k, slot, 0, 0}, f, {}});
}

void answer_error(const std::weak_ptr<connection>& wc, uint64_t slot, std::string text) {
  if (auto c = wc.lock())
    c->enqueue(outgoing{dp::header{dp::kind::error, slot, 0, 0}, nullptr, std::move(text)});
}

// Makes each request that arrived on an inbound connection to its local
// shard and queues the answer (or the error) on the same connection.
caf::behavior gateway(caf::event_based_actor* self, std::weak_ptr<connection> wc, std::chrono::milliseconds timeout) {
  return {
    [=](dp_request_atom, uint64_t slot, const caf::actor& shard, const push_msg& m) {
      self->request(shard, timeout, m)
        .then([wc, slot](const push_ack_msg& a) { answer(wc, dp::kind::push_ack, slot, a.frame()); },
              [wc, slot](caf::error& e) { answer_error(wc, slot, describe(e)); });
    },
    [=](dp_request_atom, uint64_t slot, const caf::actor& shard, const pull_request_msg& m) {
      self->request(shard, timeout, m)
        .then([wc, slot](const pull_reply_msg& r) { answer(wc, dp::kind::pull_reply, slot, r.frame()); },
              [wc, slot](caf::error& e) { answer_error(wc, slot, describe(e)); });
    },
    // A duplicating link's second copy of an answer comes as a plain
    // message; the worker has the first.
    [](const push_ack_msg&) {},
    [](const pull_reply_msg&) {},
  };
}

}  // namespace

// ---- the threads ----

void data_plane::impl::start_threads(const connection_ptr& c) {
  auto run = [c](auto body) {
    return std::thread([c, body] {
      body();
      --c->running;
    });
  };
  if (c->outbound) {
    c->writer = run([this, c] {
      auto s = dp::connect_to(c->host, c->port, cfg.connect_timeout);
      if (!s) {
        log("cannot reach " + c->name() + ": " + describe(s.error()));
        return close(c, describe(s.error()));
      }
      if (!c->adopt(std::move(*s)))
        return;
      if (auto err = dp::handshake_client(c->socket(), cfg.secret, node, c->peer)) {
        log("connection to " + c->name() + " refused: " + describe(err));
        return close(c, describe(err));
      }
      dp::set_options(c->socket(), std::chrono::milliseconds{0});
      if (!c->open())
        return;
      ++connections_out;
      log("connected to " + c->name());
      write_loop(c);
    });
    c->reader = run([this, c] {
      if (c->wait_open())
        read_answers(c);
    });
  } else {
    c->writer = run([this, c] {
      if (c->wait_open())
        write_loop(c);
    });
    c->reader = run([this, c] { read_requests(c); });
  }
}

void data_plane::impl::write_loop(const connection_ptr& c) {
  int fd = c->socket();
  outgoing o;
  while (c->next(o)) {
    bool ok = o.h.k == dp::kind::error ? dp::write_text(fd, o.h, o.text) : dp::write_frame(fd, o.h, *o.f);
    if (!ok) {
      auto why = std::string("writing to ") + c->name() + ": " +
                 (errno == EAGAIN ? "the peer stopped reading" : std::strerror(errno));
      return close(c, why);
    }
    bytes_out += o.f ? o.f->encoded_size_bytes() : o.text.size();
    o = outgoing{};  // let go of the frame now, not at the next item
  }
}

namespace {

// Reads one header; an empty optional with `why` set ends the connection.
std::optional<dp::header> next_header(int fd, const connection& c, std::string& why, bool& bad) {
  unsigned char raw[dp::header_bytes];
  if (!dp::read_exact(fd, raw, sizeof raw)) {
    why = errno == 0 ? c.name() + " closed the connection" : "reading from " + c.name() + ": " + std::strerror(errno);
    return std::nullopt;
  }
  auto h = dp::decode_header(raw);
  if (!h) {
    why = describe(h.error());
    bad = true;
    return std::nullopt;
  }
  return *h;
}

}  // namespace

void data_plane::impl::read_requests(const connection_ptr& c) {
  int fd = c->socket();
  dp::set_options(fd, cfg.connect_timeout);
  auto peer = dp::handshake_server(fd, cfg.secret, node);
  if (!peer) {
    ++refused;
    log("refused a connection: " + describe(peer.error()));
    return close(c, describe(peer.error()));
  }
  dp::set_options(fd, std::chrono::milliseconds{0});
  {
    std::lock_guard<std::mutex> guard(c->mtx);
    c->peer = *peer;
  }
  if (!c->open())
    return;
  ++connections_in;
  log("connection from " + c->name());
  std::string why;
  bool bad = false;
  for (;;) {
    auto h = next_header(fd, *c, why, bad);
    if (!h)
      break;
    if (h->k != dp::kind::push && h->k != dp::kind::pull) {
      why = "an answer (kind " + std::to_string(static_cast<uint32_t>(h->k)) + ") where requests are expected";
      bad = true;
      break;
    }
    auto f = dp::read_frame(fd, *h);
    if (!f) {
      why = describe(f.error());
      bad = is(f.error(), errc::malformed_message);
      break;
    }
    bytes_in += h->length;
    auto shard = lookup(h->target);
    if (!shard) {
      c->enqueue(outgoing{dp::header{dp::kind::error, h->slot, 0, 0}, nullptr,
                          "actor " + std::to_string(h->target) + " is not served by node " + node +
                            " (it stopped, or is not one of this node's shards)"});
      continue;
    }
    ++requests_in;
    if (h->k == dp::kind::push)
      caf::anon_send(c->actor, dp_request_atom::value, h->slot, shard, push_msg(std::move(*f)));
    else
      caf::anon_send(c->actor, dp_request_atom::value, h->slot, shard, pull_request_msg(std::move(*f)));
  }
  if (bad) {
    ++refused;
    log(c->name() + " sent bad bytes (" + why + "); closing its connection");
  }
  close(c, why);
}

void data_plane::impl::read_answers(const connection_ptr& c) {
  int fd = c->socket();
  std::string why;
  bool bad = false;
  for (;;) {
    auto h = next_header(fd, *c, why, bad);
    if (!h)
      break;
    if (h->k == dp::kind::error) {
      auto text = dp::read_text(fd, *h);
      if (!text) {
        why = describe(text.error());
        break;
      }
      caf::anon_send(c->actor, dp_error_atom::value, h->slot, std::move(*text));
      continue;
    }
    if (h->k != dp::kind::push_ack && h->k != dp::kind::pull_reply) {
      why = "a request (kind " + std::to_string(static_cast<uint32_t>(h->k)) + ") where answers are expected";
      bad = true;
      break;
    }
    auto f = dp::read_frame(fd, *h);
    if (!f) {
      why = describe(f.error());
      bad = is(f.error(), errc::malformed_message);
      break;
    }
    bytes_in += h->length;
    if (h->k == dp::kind::push_ack)
      caf::anon_send(c->actor, dp_reply_atom::value, h->slot, push_ack_msg(std::move(*f)));
    else
      caf::anon_send(c->actor, dp_reply_atom::value, h->slot, pull_reply_msg(std::move(*f)));
  }
  if (bad)
    log(c->name() + " sent bad bytes (" + why + "); closing the connection");
  close(c, why);
}

void data_plane::impl::accept_loop() {
  for (;;) {
    int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    std::lock_guard<std::mutex> guard(mtx);
    if (stopping) {
      if (fd >= 0)
        ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno != EINTR && errno != ECONNABORTED)
        log(std::string("accept: ") + std::strerror(errno));
      continue;
    }
    reap_locked();
    auto inbound = std::count_if(all.begin(), all.end(), [](const connection_ptr& x) { return !x->outbound; });
    if (static_cast<size_t>(inbound) >= cfg.max_incoming) {
      ::close(fd);
      ++refused;
      log("refused a connection: " + std::to_string(inbound) + " incoming connections are open (the limit)");
      continue;
    }
    auto c = std::make_shared<connection>();
    c->fd = dp::socket_fd(fd);
    c->actor = sys.spawn(gateway, std::weak_ptr<connection>(c), cfg.answer_timeout);
    if (!start(c))
      continue;
    all.push_back(c);
  }
}

bool data_plane::impl::start(const connection_ptr& c) {
  try {
    start_threads(c);
    return true;
  } catch (const std::system_error& e) {  // no thread to be had
    log(std::string("cannot serve a connection: ") + e.what());
    close(c, e.what());
    if (c->writer.joinable())
      c->writer.join();
    return false;
  }
}

// ---- data_plane ----

caf::expected<std::shared_ptr<data_plane>> data_plane::start(caf::actor_system& sys, data_plane_config cfg) {
  if (cfg.secret.empty())
    return make_error(errc::invalid_argument, "data plane: no cluster secret");
  auto p = std::make_shared<impl>(sys, std::move(cfg));
  p->port = p->cfg.port;
  auto l = dp::listen_on(p->cfg.host, p->port);
  if (!l)
    return l.error();
  p->listener = std::move(*l);
  p->acceptor = std::thread([raw = p.get()] { raw->accept_loop(); });
  return std::shared_ptr<data_plane>(new data_plane(std::move(p)));
}

uint16_t data_plane::port() const {
  return impl_->port;
}

const std::string& data_plane::node() const {
  return impl_->node;
}

void data_plane::serve(const caf::actor& local) {
  if (!local)
    return;
  {
    std::lock_guard<std::mutex> guard(impl_->mtx);
    impl_->served[local.id()] = local;
  }
  std::weak_ptr<impl> w = impl_;
  auto id = local.id();
  local->attach_functor([w, id] {
    if (auto p = w.lock()) {
      std::lock_guard<std::mutex> guard(p->mtx);
      p->served.erase(id);
    }
  });
}

void data_plane::add_route(const std::string& node, const std::string& host, uint16_t port) {
  std::lock_guard<std::mutex> guard(impl_->mtx);
  auto& r = impl_->routes[node];
  if (auto it = impl_->out.find(node); it != impl_->out.end() && (r.first != host || r.second != port)) {
    impl_->close(it->second, "the node moved to " + host + ":" + std::to_string(port));
    impl_->out.erase(it);  // its threads are reaped later
  }
  r = {host, port};
}

caf::actor data_plane::route(const caf::actor& dest) {
  auto& p = *impl_;
  if (!dest || dest.node() == p.sys.node())
    return {};
  auto node = to_string(dest.node());
  std::lock_guard<std::mutex> guard(p.mtx);
  if (p.stopping)
    return {};
  auto r = p.routes.find(node);
  if (r == p.routes.end())
    return {};
  auto& c = p.out[node];
  if (c) {
    steady::time_point closed_at;
    if (!c->is_closed(&closed_at))
      return c->actor;
    if (steady::now() - closed_at < p.cfg.reconnect_after)
      return {};
  }
  p.reap_locked();
  c = std::make_shared<connection>();
  c->outbound = true;
  c->peer = node;
  c->host = r->second.first;
  c->port = r->second.second;
  c->actor = p.sys.spawn(forwarder, std::weak_ptr<connection>(c), impl_ref(impl_), c->name());
  if (!p.start(c))
    return {};
  p.all.push_back(c);
  return c->actor;
}

data_plane_stats data_plane::stats() const {
  auto& p = *impl_;
  return {p.connections_out, p.connections_in, p.refused, p.requests_out, p.requests_in, p.bytes_out, p.bytes_in};
}

void data_plane::stop() {
  auto& p = *impl_;
  std::vector<connection_ptr> conns;
  {
    std::lock_guard<std::mutex> guard(p.mtx);
    if (p.stopping)
      return;
    p.stopping = true;
    p.listener.shutdown();
    conns = p.all;
  }
  for (auto& c : conns) p.close(c, "the data plane stopped");
  if (p.acceptor.joinable())
    p.acceptor.join();
  {
    std::lock_guard<std::mutex> guard(p.mtx);
    conns = p.all;  // the acceptor may have added one before it saw `stopping`
  }
  for (auto& c : conns) {
    p.close(c, "the data plane stopped");
    c->writer.join();
    c->reader.join();
  }
  std::lock_guard<std::mutex> guard(p.mtx);
  p.all.clear();
  p.out.clear();
  p.served.clear();
}

data_plane::~data_plane() {
  stop();
}

}  // namespace keel
