#include "actors/cluster/cluster_gate.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <iostream>
#include <set>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/cluster_gate_wire.hpp"
#include "actors/cluster/tls_scribe.hpp"
#include "actors/data_plane/data_plane_wire.hpp"
#include "actors/net/rate_limited_log.hpp"
#include "messages/errors.hpp"

namespace keel {

using namespace gate_wire;

namespace {

using steady = std::chrono::steady_clock;

// When accept fails for want of descriptors and no waiting connection can
// be closed to free one, the gate stops accepting this long.
constexpr auto accept_pause = std::chrono::milliseconds(100);

std::string address_of(const sockaddr_in& a) {
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(a.sin_port));
}

// A connection that has not completed the handshake. `in` holds what was
// read of the current step; `need` is that step's size (at most
// head_bytes + max_node_text + challenge_bytes).
struct pending {
  enum class step { tls, head, hello, proof };
  dp::socket_fd fd;
  std::unique_ptr<tls_session> tls;  // with TLS on: the handshake, then all bytes
  std::string from;  // the peer's address
  steady::time_point deadline;
  step at = step::head;
  std::vector<unsigned char> in;
  size_t need = head_bytes;
  std::string node;                // as the peer's hello claims it
  std::vector<uint8_t> challenge;  // ours

  // At most n bytes from the peer (through TLS when on): >0 read, 0 end
  // of stream, -1 error (errno; EAGAIN: nothing now).
  ssize_t receive(unsigned char* data, size_t n) {
    if (!tls)
      return ::recv(fd.get(), data, n, 0);
    auto got = tls->read_some(data, n);
    if (got > 0)
      return got;
    if (got < 0 && tls->peer_closed())
      return 0;
    errno = got == 0 ? EAGAIN : EPROTO;
    return -1;
  }
  // Sends all of `data` at once or fails: a fresh socket's buffer takes a
  // handshake message whole, and a peer whose does not is refused rather
  // than waited for.
  bool send_whole(const void* data, size_t n) {
    if (!tls)
      return ::send(fd.get(), data, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
    return tls->write_some(data, n) == static_cast<long>(n);
  }
  std::string failure() const {
    return tls && !tls->failure().empty() ? tls->failure() : std::string(std::strerror(errno));
  }
};

}  // namespace

struct cluster_gate::impl {
  impl(caf::actor_system& s, cluster_gate_config c, caf::actor a)
      : sys(s),
        cfg(std::move(c)),
        agent(std::move(a)),
        node(to_string(s.node())),
        refusals(cfg.log, cfg.log_burst, std::chrono::milliseconds(1000), "refused connections") {}

  caf::actor_system& sys;
  cluster_gate_config cfg;
  caf::actor agent;
  caf::actor basp;
  std::string node;
  uint16_t port = 0;
  dp::socket_fd listener;
  dp::socket_fd wake_read, wake_write;
  std::thread thread;
  std::atomic<bool> stopping{false};
  rate_limited_log refusals;
  std::deque<pending> waiting;  // oldest first
  steady::time_point accept_paused_until{};
  std::atomic<uint64_t> accepted{0}, authenticated{0}, refused{0}, evicted{0}, timed_out{0},
      log_dropped{0};

  void refuse(const pending& p, const std::string& why, steady::time_point now) {
    ++refused;
    refusals(
        "refused a connection from " + p.from + " to port " + std::to_string(port) + ": " + why,
        now);
    log_dropped = refusals.dropped_total();
  }

  void run();
  void accept_all(steady::time_point now);
  // Reads what `p` sent; true when it is finished with (handed over or
  // refused, which `why` then says).
  bool advance(pending& p, std::string& why);
  bool complete_step(pending& p, std::string& why);
  void admit(pending& p);
};

bool cluster_gate::impl::complete_step(pending& p, std::string& why) {
  switch (p.at) {
    case pending::step::tls:  // advance() completes it before reading a step
      return false;
    case pending::step::head: {
      size_t n = 0;
      if (!parse_head(p.in.data(), n, why))
        return true;
      p.at = pending::step::hello;
      p.need = head_bytes + n + challenge_bytes;
      return false;
    }
    case pending::step::hello: {
      auto n = p.need - head_bytes - challenge_bytes;
      p.node.assign(reinterpret_cast<const char*>(p.in.data() + head_bytes), n);
      const unsigned char* theirs = p.in.data() + head_bytes + n;
      p.challenge = random_bytes(challenge_bytes);
      auto out = hello(node, p.challenge);
      auto proof = cfg.secret.prove(gate_label, theirs, challenge_bytes, node);
      out.insert(out.end(), proof.begin(), proof.end());
      if (!p.send_whole(out.data(), out.size())) {
        why = "cannot answer node " + p.node + "'s hello: " + p.failure();
        return true;
      }
      p.at = pending::step::proof;
      p.in.clear();
      p.need = proof_bytes;
      return false;
    }
    case pending::step::proof: {
      if (!proof_matches(
              cfg.secret.prove(connector_label, p.challenge.data(), p.challenge.size(), p.node),
              p.in.data())) {
        why = "node " + p.node + " sent a wrong proof of the cluster secret";
        return true;
      }
      if (!p.send_whole(&verdict_accepted, 1)) {
        why = "cannot accept node " + p.node + ": " + p.failure();
        return true;
      }
      admit(p);
      return true;
    }
  }
  return true;
}

bool cluster_gate::impl::advance(pending& p, std::string& why) {
  if (p.at == pending::step::tls) {
    switch (p.tls->handshake_step()) {
      case tls_session::progress::done:
        p.at = pending::step::head;
        break;  // the hello may already be here
      case tls_session::progress::failed:
        why = "TLS: " + p.tls->failure();
        return true;
      default:
        return false;
    }
  }
  for (;;) {
    auto have = p.in.size();
    p.in.resize(p.need);
    auto got = p.receive(p.in.data() + have, p.need - have);
    p.in.resize(have + static_cast<size_t>(std::max<ssize_t>(got, 0)));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return false;
    if (got <= 0) {
      auto what = got == 0 ? std::string("closed the connection") : p.failure();
      if (p.at == pending::step::proof)
        why = "node " + p.node + " " + what +
              " without proving the cluster secret (it may hold another secret)";
      else
        why = what + " before completing its hello";
      return true;
    }
    if (p.in.size() == p.need && complete_step(p, why))
      return true;
  }
}

void cluster_gate::impl::admit(pending& p) {
  ++authenticated;
  cfg.log("node " + p.node + " authenticated from " + p.from +
          (p.tls ? " (TLS, certificate of " + p.tls->peer_name() + ")" : std::string()));
  // From here on the connection is CAF's: the broker adopts it as if its
  // own doorman had accepted it, and answers with the BASP server handshake
  // naming the agent as the actor published at this port. With TLS the
  // scribe takes the session along: BASP's bytes stay inside it.
  auto scribe = p.tls ? make_tls_scribe(sys, p.fd.release(), std::move(p.tls))
                      : sys.middleman().backend().new_scribe(p.fd.release());
  caf::anon_send(basp, caf::publish_atom::value, std::move(scribe), port,
                 caf::actor_cast<caf::strong_actor_ptr>(agent), std::set<std::string>{});
}

void cluster_gate::impl::accept_all(steady::time_point now) {
  for (;;) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    int fd = ::accept4(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        refusals("cannot accept on port " + std::to_string(port) + ": " + std::strerror(errno),
                 now);
        if (!waiting.empty()) {  // free a descriptor for a newer peer
          ++evicted;
          refuse(waiting.front(),
                 "closed to free a descriptor (" + std::string(std::strerror(errno)) + ")", now);
          waiting.pop_front();
          continue;
        }
        accept_paused_until = now + accept_pause;
      }
      return;  // EAGAIN: nothing more to accept now
    }
    ++accepted;
    pending p;
    p.fd = dp::socket_fd(fd);
    p.from = address_of(addr);
    p.deadline = now + cfg.handshake_timeout;
    p.in.reserve(head_bytes + max_node_text + challenge_bytes);
    if (cfg.tls) {
      auto session = tls_session::make(*cfg.tls, fd, tls_session::role::accept);
      if (!session) {
        refuse(p, describe(session.error()), now);
        continue;
      }
      p.tls = std::move(*session);
      p.at = pending::step::tls;
    }
    if (waiting.size() >= cfg.max_pending) {
      ++evicted;
      refuse(waiting.front(),
             "closed for a newer connection: " + std::to_string(waiting.size()) +
                 " connections are awaiting authentication (the limit)",
             now);
      waiting.pop_front();
    }
    waiting.push_back(std::move(p));
  }
}

void cluster_gate::impl::run() {
  std::vector<pollfd> fds;
  while (!stopping.load()) {
    auto now = steady::now();
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      ++timed_out;
      refuse(
          *it,
          "no complete handshake within " + std::to_string(cfg.handshake_timeout.count()) + " ms",
          now);
      it = waiting.erase(it);
    }
    refusals.flush(now);
    auto wake_at = refusals.next_flush();
    for (auto& p : waiting) wake_at = std::min(wake_at, p.deadline);
    bool accepting = now >= accept_paused_until;
    if (!accepting)
      wake_at = std::min(wake_at, accept_paused_until);
    fds.clear();
    fds.push_back({wake_read.get(), POLLIN, 0});
    fds.push_back({accepting ? listener.get() : -1, POLLIN, 0});
    for (auto& p : waiting) {
      bool out = p.tls && p.tls->want() == tls_session::progress::want_write;
      fds.push_back({p.fd.get(), static_cast<short>(out ? POLLOUT : POLLIN), 0});
    }
    int timeout_ms = -1;
    if (wake_at != steady::time_point::max())
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count()));
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      cfg.log(std::string("the gate's poll failed: ") + std::strerror(errno) + "; the gate stops");
      return;
    }
    if (fds[0].revents != 0)
      return;
    now = steady::now();
    // Finished connections leave `waiting` before new ones join it, so the
    // indices of fds stay those of `waiting`.
    size_t i = 0;
    for (auto it = waiting.begin(); it != waiting.end(); ++i) {
      std::string why;
      if (fds[i + 2].revents == 0 || !advance(*it, why)) {
        ++it;
        continue;
      }
      if (!why.empty())
        refuse(*it, why, now);
      it = waiting.erase(it);
    }
    if (fds[1].revents != 0)
      accept_all(now);
  }
}

cluster_gate::cluster_gate(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

caf::expected<std::unique_ptr<cluster_gate>> cluster_gate::open(caf::actor_system& sys,
                                                                cluster_gate_config cfg,
                                                                caf::actor agent) {
  if (cfg.secret.empty())
    return make_error(errc::invalid_argument, "cluster gate: no cluster secret");
  if (!agent)
    return make_error(errc::invalid_argument, "cluster gate: no actor to serve");
  if (cfg.max_pending == 0 || cfg.handshake_timeout.count() <= 0)
    return make_error(
        errc::invalid_argument,
        "cluster gate: the connection limit and the handshake timeout must be positive");
  if (!cfg.log)
    cfg.log = [](const std::string& line) {
      std::cerr << "keel gate: " + line + "\n" << std::flush;
    };
  auto p = std::make_unique<impl>(sys, std::move(cfg), std::move(agent));
  p->basp = basp_broker_of(sys);
  if (!p->basp)
    return make_error(errc::invalid_argument, "cluster gate: the actor system has no middleman");
  p->port = p->cfg.port;
  auto l = dp::listen_on(p->cfg.host, p->port, SOMAXCONN, "cluster port");
  if (!l)
    return l.error();
  p->listener = std::move(*l);
  ::fcntl(p->listener.get(), F_SETFL, ::fcntl(p->listener.get(), F_GETFL) | O_NONBLOCK);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0)
    return make_error(errc::io_error, std::string("cluster gate: pipe: ") + std::strerror(errno));
  p->wake_read = dp::socket_fd(wake[0]);
  p->wake_write = dp::socket_fd(wake[1]);
  p->thread = std::thread([raw = p.get()] { raw->run(); });
  return std::unique_ptr<cluster_gate>(new cluster_gate(std::move(p)));
}

uint16_t cluster_gate::port() const {
  return impl_->port;
}

cluster_gate_stats cluster_gate::stats() const {
  auto& p = *impl_;
  return {p.accepted, p.authenticated, p.refused, p.evicted, p.timed_out, p.log_dropped};
}

void cluster_gate::stop() {
  auto& p = *impl_;
  if (!p.thread.joinable())
    return;
  p.stopping = true;
  unsigned char one = 1;
  [[maybe_unused]] auto n = ::write(p.wake_write.get(), &one, 1);
  p.thread.join();
  p.waiting.clear();
  p.listener = dp::socket_fd();
}

cluster_gate::~cluster_gate() {
  stop();
}

}  // namespace keel
