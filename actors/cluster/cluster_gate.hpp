#pragma once
// A cluster_gate is the public port of a keel node: it accepts TCP
// connections itself and lets CAF's middleman (BASP) see only those that
// proved the cluster secret. CAF 0.17's BASP acts on a peer's bytes before
// anything of keel's runs (a header announcing a 4 GiB payload is allocated
// at once; any BASP peer can address every actor a node ever published or
// sent by its id, and kill it with the untrappable exit_reason::kill), so
// the only place to refuse a stranger is before BASP starts.
//
// Protocol on a new connection, before any BASP byte (both directions
// HMAC-SHA256 under the cluster secret, bound to both CAF node ids, with
// labels of their own, so a proof made for the data plane never passes
// here):
//   connector -> gate: "KEELCP01", u32 length, node id, 32-byte challenge Cc
//   gate -> connector: "KEELCP01", u32 length, node id, 32-byte challenge Cg,
//                      proof over Cc
//   connector -> gate: proof over Cg
//   gate -> connector: 'K'
// then the socket is handed to CAF's BASP broker as if accepted by it, with
// the gate's actor (the node agent) as the actor published at the gate's
// port. With TLS (cfg.tls), a TLS handshake with certificates verified both
// ways (actors/net/tls.hpp) comes first, the exchange above runs inside it, and
// CAF's BASP then runs over the same TLS session (actors/cluster/tls_scribe.hpp): a
// peer whose certificate our CA did not sign is refused during the
// handshake, before any byte of it is read as keel's or BASP's. A connector checks the gate's proof before it proves anything, and
// that BASP's node id is the one the gate proved.
//
// What an unauthenticated peer costs: one descriptor and at most 300 bytes
// of buffer (with TLS, OpenSSL's session and record buffers instead, tens
// of KiB), for at most `handshake_timeout`; at most `max_pending`
// connections wait for authentication at once, and a new one beyond that
// closes the oldest waiting one (so a flood must be sustained to keep a
// member out, and a member's handshake, which takes one round trip, gets
// through). Every refusal is logged with the peer's address and the port,
// rate-limited (`log_burst` lines per second, then a count). Authenticated
// connections are not capped: members are trusted (see
// actors/cluster/node_agent.hpp for what a member may do). This is also where the TLS
// handshake sits: the gate hands CAF a connection only once the peer is
// known.
//
// Thread-safety: one thread of its own runs the gate (poll, no thread per
// connection); port() and stats() may be called from any thread; stop() from
// one. Without TLS nothing is encrypted: the secret-only setup is for a
// trusted network (loopback development).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/net/cluster_secret.hpp"
#include "actors/net/tls.hpp"

namespace keel {

struct cluster_gate_config {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the OS picks one
  cluster_secret secret;
  // TLS on every connection (null: none); a peer must present a
  // certificate this context's CA signed.
  std::shared_ptr<const tls_context> tls;
  // A connection that has not completed the handshake this long after it
  // was accepted is closed.
  std::chrono::milliseconds handshake_timeout{1000};
  // Connections awaiting authentication at once; a new one beyond this
  // closes the oldest.
  size_t max_pending = 64;
  // Refusal lines written per second; more are counted and summarised.
  size_t log_burst = 20;
  // One line per event; called from the gate's thread only. Null: standard
  // error, prefixed "keel gate: ".
  std::function<void(const std::string&)> log;
};

struct cluster_gate_stats {
  uint64_t accepted = 0;       // TCP connections accepted
  uint64_t authenticated = 0;  // handed to CAF's middleman
  uint64_t refused = 0;        // closed without authentication (any reason)
  uint64_t evicted = 0;        // of which: closed for a newer one at max_pending
  uint64_t timed_out = 0;      // of which: no complete handshake in time
  uint64_t log_lines_dropped = 0;
};

class cluster_gate {
 public:
  // Listens on cfg.host:cfg.port and serves `agent` (published at the
  // gate's port to every authenticated peer). Errors: invalid_argument (no
  // secret, no agent, a zero limit), io_error naming the address when it
  // cannot listen.
  static caf::expected<std::unique_ptr<cluster_gate>> open(caf::actor_system& sys,
                                                           cluster_gate_config cfg,
                                                           caf::actor agent);

  uint16_t port() const;
  cluster_gate_stats stats() const;

  // Closes the listener and every connection still awaiting authentication
  // and joins the gate's thread; connections already handed to CAF stay.
  // Idempotent; the destructor calls it.
  void stop();

  ~cluster_gate();
  cluster_gate(const cluster_gate&) = delete;
  cluster_gate& operator=(const cluster_gate&) = delete;

  struct impl;

 private:
  explicit cluster_gate(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// The connector's side: opens a TCP connection to the gate at host:port,
// runs the handshake (each step bounded by `timeout`), hands the connection
// to this system's middleman and returns the actor the gate serves. Errors:
// not_found (nothing listens there), not_authenticated (the gate does not
// prove the secret, or refused ours), timeout, io_error (the gate closed the
// connection during the handshake: too many peers awaiting authentication,
// or not a keel node), malformed_message (not a keel gate's answer). With
// `tls` on, a TLS handshake comes first and the gate's certificate must
// state tls.name (not_authenticated otherwise, naming why).
struct gated_peer {
  caf::actor agent;
  std::string node;  // its CAF node id, as to_string renders it
};
caf::expected<gated_peer> connect_through_gate(caf::actor_system& sys, const std::string& host,
                                               uint16_t port, const cluster_secret& secret,
                                               std::chrono::milliseconds timeout, const tls_peer& tls = {});

}  // namespace keel
