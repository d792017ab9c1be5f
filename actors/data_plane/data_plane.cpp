#include "actors/data_plane/data_plane.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "actors/data_plane/data_plane_impl.hpp"
#include "messages/errors.hpp"

namespace keel {

using namespace dp_detail;

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
      if (cfg.tls) {
        if (auto why = c->secure(*cfg.tls, tls_session::role::connect, cfg.connect_timeout); !why.empty()) {
          log("connection to " + c->name() + " refused: TLS: " + why);
          return close(c, "TLS: " + why);
        }
        c->bytes()->set_timeout(cfg.connect_timeout);
      }
      if (auto err = dp::handshake_client(*c->bytes(), cfg.secret, node, c->peer)) {
        log("connection to " + c->name() + " refused: " + describe(err));
        return close(c, describe(err));
      }
      c->bytes()->set_timeout(std::chrono::milliseconds{0});
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
  auto io = c->bytes();
  auto& fd = *io;
  outgoing o;
  while (c->next(o)) {
    bool ok = o.h.k == dp::kind::error ? dp::write_text(fd, o.h, o.text) : dp::write_frame(fd, o.h, *o.f);
    if (!ok) {
      auto why = std::string("writing to ") + c->name() + ": " +
                 (errno == EAGAIN ? "the peer stopped reading"
                  : errno == EPROTO ? "TLS: " + fd.failure()
                                    : std::string(std::strerror(errno)));
      return close(c, why);
    }
    bytes_out += o.f ? o.f->encoded_size_bytes() : o.text.size();
    o = outgoing{};  // let go of the frame now, not at the next item
  }
}

namespace {

struct read_end {
  std::string why;   // how the connection ended
  bool bad = false;  // the peer sent bytes that break the protocol
};

// Reads header after header with its body until the connection ends. A
// frame of a kind in `frames` goes to on_frame(header, frame), an error
// text (where `texts`) to on_text(header, text); any other kind is bad
// bytes ("<unexpected> (kind N) where <expected> are expected").
template <class OnFrame, class OnText>
read_end read_frames(dp::link& fd, const connection& c, std::array<dp::kind, 2> frames, bool texts,
                     const char* unexpected, const char* expected, std::atomic<uint64_t>& bytes_in,
                     OnFrame on_frame, OnText on_text) {
  for (;;) {
    unsigned char raw[dp::header_bytes];
    if (!fd.read_exact(raw, sizeof raw))
      return {errno == 0        ? c.name() + " closed the connection"
              : errno == EPROTO ? "reading from " + c.name() + ": TLS: " + fd.failure()
                                : "reading from " + c.name() + ": " + std::strerror(errno)};
    auto h = dp::decode_header(raw);
    if (!h)
      return {describe(h.error()), true};
    if (texts && h->k == dp::kind::error) {
      auto text = dp::read_text(fd, *h);
      if (!text)
        return {describe(text.error())};
      on_text(*h, std::move(*text));
      continue;
    }
    if (h->k != frames[0] && h->k != frames[1])
      return {std::string(unexpected) + " (kind " + std::to_string(static_cast<uint32_t>(h->k)) + ") where " +
                expected + " are expected",
              true};
    auto f = dp::read_frame(fd, *h);
    if (!f)
      return {describe(f.error()), is(f.error(), errc::malformed_message)};
    bytes_in += h->length;
    on_frame(*h, std::move(*f));
  }
}

}  // namespace

void data_plane::impl::read_requests(const connection_ptr& c) {
  if (cfg.tls) {
    // Nothing of a peer whose certificate our CA did not sign is read as
    // the data plane's: the TLS handshake refuses it first.
    if (auto why = c->secure(*cfg.tls, tls_session::role::accept, cfg.connect_timeout); !why.empty()) {
      ++refused;
      log_refusal(*c, "TLS: " + why);
      return close(c, "TLS: " + why);
    }
  }
  auto io = c->bytes();
  auto& fd = *io;
  fd.set_timeout(cfg.connect_timeout);
  auto peer = dp::handshake_server(fd, cfg.secret, node);
  if (!peer) {
    ++refused;
    log_refusal(*c, describe(peer.error()));
    return close(c, describe(peer.error()));
  }
  fd.set_timeout(std::chrono::milliseconds{0});
  {
    std::lock_guard<std::mutex> guard(c->mtx);
    c->peer = *peer;
  }
  if (!c->open())
    return;
  ++connections_in;
  log("connection from " + c->name());
  auto end = read_frames(
    fd, *c, {dp::kind::push, dp::kind::pull}, false, "an answer", "requests", bytes_in,
    [&](const dp::header& h, frame_ptr f) {
      auto shard = lookup(h.target);
      if (!shard) {
        c->enqueue(outgoing{dp::header{dp::kind::error, h.slot, 0, 0}, nullptr,
                            "actor " + std::to_string(h.target) + " is not served by node " + node +
                              " (it stopped, or is not one of this node's shards)"});
        return;
      }
      ++requests_in;
      if (h.k == dp::kind::push)
        caf::anon_send(c->actor, dp_request_atom::value, h.slot, shard, push_msg(std::move(f)));
      else
        caf::anon_send(c->actor, dp_request_atom::value, h.slot, shard, pull_request_msg(std::move(f)));
    },
    [](const dp::header&, std::string) {});
  if (end.bad) {
    ++refused;
    log(c->name() + " sent bad bytes (" + end.why + "); closing its connection");
  }
  close(c, end.why);
}

void data_plane::impl::read_answers(const connection_ptr& c) {
  auto io = c->bytes();
  auto end = read_frames(
    *io, *c, {dp::kind::push_ack, dp::kind::pull_reply}, true, "a request", "answers", bytes_in,
    [&](const dp::header& h, frame_ptr f) {
      if (h.k == dp::kind::push_ack)
        caf::anon_send(c->actor, dp_reply_atom::value, h.slot, push_ack_msg(std::move(f)));
      else
        caf::anon_send(c->actor, dp_reply_atom::value, h.slot, pull_reply_msg(std::move(f)));
    },
    [&](const dp::header& h, std::string text) {
      caf::anon_send(c->actor, dp_error_atom::value, h.slot, std::move(text));
    });
  if (end.bad)
    log(c->name() + " sent bad bytes (" + end.why + "); closing the connection");
  close(c, end.why);
}

void data_plane::impl::accept_loop() {
  for (;;) {
    sockaddr_in addr{};
    socklen_t addr_len = sizeof addr;
    int fd = ::accept4(listener.get(), reinterpret_cast<sockaddr*>(&addr), &addr_len, SOCK_CLOEXEC);
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
    auto c = std::make_shared<connection>();
    char text[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
    c->from = std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
    if (static_cast<size_t>(inbound) >= cfg.max_incoming) {
      ::close(fd);
      ++refused;
      log_refusal(*c, std::to_string(inbound) + " incoming connections are open (the limit)");
      continue;
    }
    c->fd = dp::socket_fd(fd);
    c->io = std::make_shared<dp::link>(fd);
    c->actor = spawn_gateway(sys, std::weak_ptr<connection>(c), cfg.answer_timeout);
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

void data_plane::add_route(const std::string& node, const std::string& host, uint16_t port,
                           const std::string& tls_name) {
  if (node == impl_->node)
    return;  // its own shards are reached locally
  std::lock_guard<std::mutex> guard(impl_->mtx);
  auto& r = impl_->routes[node];
  if (r.host != host || r.port != port) {
    for (auto it = impl_->out.begin(); it != impl_->out.end(); ++it)
      if (it->second->peer == node) {
        impl_->close(it->second, "the node moved to " + host + ":" + std::to_string(port));
        impl_->out.erase(it);  // its threads are reaped later
        break;
      }
  }
  r = {host, port, tls_name.empty() ? host : tls_name};
}

caf::actor data_plane::route(const caf::actor& dest) {
  auto& p = *impl_;
  if (!dest || dest.node() == p.sys.node())
    return {};
  std::lock_guard<std::mutex> guard(p.mtx);
  if (p.stopping)
    return {};
  // The hot path (every push and pull): an open connection, found by node id.
  if (auto it = p.out.find(dest.node()); it != p.out.end()) {
    steady::time_point closed_at;
    if (!it->second->is_closed(&closed_at))
      return it->second->actor;
    if (steady::now() - closed_at < p.cfg.reconnect_after)
      return {};
  }
  auto node = to_string(dest.node());
  auto r = p.routes.find(node);
  if (r == p.routes.end())
    return {};
  p.reap_locked();
  auto& c = p.out[dest.node()];
  c = std::make_shared<connection>();
  c->outbound = true;
  c->peer = node;
  c->host = r->second.host;
  c->port = r->second.port;
  c->tls_name = r->second.tls_name;
  c->actor = spawn_forwarder(p.sys, std::weak_ptr<connection>(c), std::weak_ptr<data_plane::impl>(impl_), c->name());
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
  {
    std::lock_guard<std::mutex> guard(p.refusal_mtx);
    p.refusals.flush(steady::time_point::max());  // the count of a window still open
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
