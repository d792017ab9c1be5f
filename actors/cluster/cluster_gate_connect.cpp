#include "actors/cluster/cluster_gate.hpp"

#include <cerrno>
#include <cstring>
#include <set>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/cluster_gate_wire.hpp"
#include "actors/cluster/tls_scribe.hpp"
#include "actors/data_plane/data_plane_wire.hpp"
#include "messages/errors.hpp"

namespace keel {

using namespace gate_wire;

namespace {

// Blocking reads and writes on a socket whose timeouts are set (through
// TLS when on); errors name the node's address and the step.
struct connector {
  int fd;
  std::string at;
  std::unique_ptr<tls_session> tls;
  std::chrono::milliseconds timeout;

  bool read(void* data, size_t n) {
    return tls ? tls->read_exact(data, n, timeout) : dp::read_exact(fd, data, n);
  }
  bool write(const void* data, size_t n) {
    if (!tls)
      return dp::write_exact(fd, data, n);
    // A node that refused this side's certificate has said so already.
    return !tls->ended_by_peer() && tls->write_exact(data, n, timeout);
  }

  caf::error failed(const std::string& step) const {
    if (tls && errno == EPROTO)
      return make_error(errc::not_authenticated, "node at " + at + ": " + step + ": TLS: " + tls->failure());
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return make_error(errc::timeout,
                        "node at " + at + ": no answer to the cluster handshake (" + step + ")");
    if (errno == 0)
      return make_error(errc::io_error,
                        "node at " + at + " closed the connection during the cluster handshake (" +
                            step + "; too many peers awaiting authentication, or not a keel node)");
    return make_error(errc::io_error, "node at " + at + ": " + step + ": " + std::strerror(errno));
  }
};

// TLS on the connected socket, the peer's certificate checked against the
// route's name.
caf::error secure(connector& c, const tls_peer& tls) {
  auto session = tls_session::make(*tls.context, c.fd, tls_session::role::connect, tls.name);
  if (!session)
    return session.error();
  c.tls = std::move(*session);
  if (auto err = c.tls->handshake(c.timeout))
    return make_error(is(err, errc::timeout)    ? errc::timeout
                      : is(err, errc::io_error) ? errc::io_error
                                                : errc::not_authenticated,
                      "node at " + c.at + " (TLS name " + tls.name + "): " + describe(err));
  return {};
}

// The cluster secret's challenge, both ways (cluster_gate_wire.hpp); the
// node's name as it proved it.
caf::expected<std::string> exchange_proofs(connector& c, const std::string& me,
                                           const cluster_secret& secret) {
  auto mine = random_bytes(challenge_bytes);
  auto out = hello(me, mine);
  if (!c.write(out.data(), out.size()))
    return c.failed("sending the hello");
  unsigned char head[head_bytes];
  if (!c.read(head, sizeof head))
    return c.failed("reading the node's hello");
  size_t n = 0;
  std::string why;
  if (!parse_head(head, n, why))
    return make_error(errc::malformed_message, "node at " + c.at + " answered with " + why);
  std::string node(n, '\0');
  std::vector<uint8_t> theirs(challenge_bytes);
  unsigned char proof[proof_bytes];
  if (!c.read(node.data(), node.size()) || !c.read(theirs.data(), theirs.size()) ||
      !c.read(proof, sizeof proof))
    return c.failed("reading the node's hello");
  if (!proof_matches(secret.prove(gate_label, mine.data(), mine.size(), node), proof))
    return make_error(
        errc::not_authenticated,
        "node at " + c.at + " did not prove the cluster secret (do both sides use the same secret?)");
  auto my_proof = secret.prove(connector_label, theirs.data(), theirs.size(), me);
  if (!c.write(my_proof.data(), my_proof.size()))
    return c.failed("sending the proof");
  unsigned char verdict = 0;
  if (!c.read(&verdict, 1) || verdict != verdict_accepted)
    return make_error(errc::not_authenticated,
                      "node at " + c.at + " refused this process's proof of the cluster secret");
  return node;
}

// CAF's BASP handshake on the authenticated connection, as after
// middleman::remote_actor's own connect; the node must speak CAF as the
// name it proved.
caf::expected<gated_peer> hand_to_basp(caf::actor_system& sys, dp::socket_fd sock, connector& c,
                                       const std::string& node, uint16_t port) {
  dp::set_options(c.fd, std::chrono::milliseconds{0});
  auto basp = basp_broker_of(sys);
  if (!basp)
    return make_error(errc::invalid_argument, "connect to " + c.at + ": this actor system has no middleman");
  auto scribe = c.tls ? make_tls_scribe(sys, sock.release(), std::move(c.tls))
                      : sys.middleman().backend().new_scribe(sock.release());
  caf::expected<gated_peer> result = make_error(errc::timeout, "node at " + c.at + ": no BASP handshake");
  caf::scoped_actor self{sys};
  self->request(basp, c.timeout, caf::connect_atom::value, std::move(scribe), port)
      .receive(
          [&](caf::node_id& nid, caf::strong_actor_ptr& addr, std::set<std::string>&) {
            if (to_string(nid) != node)
              result = make_error(errc::not_authenticated,
                                  "node at " + c.at + " proved the secret as node " + node +
                                      " but speaks CAF as node " + to_string(nid));
            else if (!addr)
              result = make_error(errc::not_found, "node at " + c.at + " serves no agent");
            else
              result = gated_peer{caf::actor_cast<caf::actor>(addr), node};
          },
          [&](caf::error& e) {
            result = e == caf::sec::request_timeout
                       ? make_error(errc::timeout, "node at " + c.at + ": no BASP handshake within " +
                                                     std::to_string(c.timeout.count()) + " ms")
                       : make_error(errc::io_error, "node at " + c.at + ": BASP handshake: " + sys.render(e));
          });
  return result;
}

}  // namespace

caf::expected<gated_peer> connect_through_gate(caf::actor_system& sys, const std::string& host,
                                               uint16_t port, const cluster_secret& secret,
                                               std::chrono::milliseconds timeout, const tls_peer& tls) {
  auto at = host + ":" + std::to_string(port);
  // A zero socket timeout would mean none at all: a stopped node would
  // block this call for ever.
  if (timeout.count() <= 0)
    return make_error(errc::timeout, "node at " + at + ": no time left to connect");
  auto sock = dp::connect_to(host, port, timeout, "cluster port");
  if (!sock)
    return make_error(is(sock.error(), errc::timeout) ? errc::timeout : errc::not_found,
                      "cannot reach a node at " + at + ": " + describe(sock.error()));
  connector c{sock->get(), at, nullptr, timeout};
  if (tls.on())
    if (auto err = secure(c, tls))
      return err;
  auto node = exchange_proofs(c, to_string(sys.node()), secret);
  if (!node)
    return node.error();
  return hand_to_basp(sys, std::move(*sock), c, *node, port);
}

}  // namespace keel