#pragma once
// The client side of a node agent (actors/cluster/node_agent.hpp): set up an actor
// system for a cluster, connect to a node and prove the cluster secret
// (checking that the node proves it too), start actors there and ask it
// which nodes are live. Every call blocks the calling thread for at most its
// timeout, so a supervisor's start function (supervision/child_spec.hpp)
// may call spawn_on. Errors name the node and what failed; a node that does
// not answer in time is errc::timeout, a wrong secret errc::not_authenticated.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/cluster/node_protocol.hpp"
#include "actors/net/cluster_secret.hpp"
#include "actors/net/tls.hpp"

namespace keel {

struct cluster_settings {
  // CAF's middleman heartbeat and connection timeout: a hung peer (SIGSTOP)
  // is dropped, and its actors reported down, after connection_timeout.
  std::chrono::milliseconds heartbeat_interval{200};
  std::chrono::milliseconds connection_timeout{800};
  size_t max_threads = 2;
};

// Loads CAF's middleman into `cfg`, sets the heartbeat, connection timeout
// and scheduler threads, deserializes peers' messages on the middleman's
// thread (no BASP workers on the scheduler, which blocking spawns can fill),
// and registers every type a node exchanges.
void configure_cluster_system(caf::actor_system_config& cfg, const cluster_settings& s = {});

// In sanitizer builds, keeps CAF's BASP broker (and what only it reaches) out
// of LeakSanitizer's report. CAF 0.17.6 sometimes shuts its middleman down
// without finalizing the broker when a peer died during the run (seen after
// kill -9 of a node, about 1 run in 20 under load): the broker, its mailbox
// and its proxies' bookkeeping stay in a reference cycle at exit. Our own
// leaks stay reported. A no-op in other builds; called by connect_node and
// by keel node once it listens.
void exempt_caf_network_layer_from_leak_checks(caf::actor_system& sys);

// Drops this process's proxies of every node it has heard of that no
// route reaches now, as CAF drops a peer's proxies when its direct
// connection closes. CAF 0.17 does that only for the peer whose connection
// closed, not for the nodes it reached through it (indirect routes): their
// proxies outlive every route, a handle of their actors received later
// resolves to the stale proxy, no route is learned again, and what is sent
// to them is dropped without a word (a client back from SIGSTOP asked its
// shards for ever). Once dropped, their monitors get a down
// (remote_link_unreachable) and the next handle of such a node makes a
// fresh proxy, which learns its route through the peer that sent it.
// Asynchronous (runs on the middleman's thread); a node that is reachable,
// or has no proxies, is left alone. The node agent calls it whenever a
// link is lost.
void forget_unreachable_nodes(caf::actor_system& sys);

// A connected, mutually authenticated node.
struct node_handle {
  caf::actor agent;
  std::string node;  // its CAF node id
  std::string host;
  uint16_t port = 0;
  uint16_t data_port = 0;  // its data plane (actors/data_plane/data_plane.hpp); 0: none
  std::string tls_name;    // with TLS: the name its certificate was verified to state
  // A client process (keel::cluster_client): the workers whose loops it
  // runs, which are all it takes. Empty: a node.
  std::vector<uint32_t> client_workers;
};

// Who is connecting: a client (a coordinator) by default; a node joining
// another passes its own agent and listening address.
struct join_identity {
  caf::actor agent;
  std::string host;
  uint16_t port = 0;
};

// Connects to the node's gate at host:port (actors/cluster/cluster_gate.hpp: the
// secret's challenge on the raw socket, then CAF's BASP), then runs the
// agent's handshake. Each step is bounded by `timeout`; a gate that closes
// the connection during its handshake (too many strangers waiting) is
// asked again until `timeout` has passed. With `tls` on, the connection
// runs TLS first (actors/cluster/cluster_gate.hpp) and the node's certificate must
// state tls.name.
caf::expected<node_handle> connect_node(caf::actor_system& sys, const std::string& host, uint16_t port,
                                        const cluster_secret& secret, std::chrono::milliseconds timeout,
                                        const join_identity& me = {}, const tls_peer& tls = {});

// Asks `node` to start the actor `req` describes and returns its handle.
// Monitor it: a node that dies takes its children down with it.
caf::expected<caf::actor> spawn_on(const node_handle& node, const spawn_request& req,
                                   std::chrono::milliseconds timeout);

// The nodes `node` knows to be live, itself first.
caf::expected<std::vector<node_info>> list_nodes(const node_handle& node, std::chrono::milliseconds timeout);

caf::expected<node_status> status_of(const node_handle& node, std::chrono::milliseconds timeout);

// The node's snapshot_replica (actors/ps/snapshot_replica.hpp).
caf::expected<caf::actor> replica_of(const node_handle& node, std::chrono::milliseconds timeout);

}  // namespace keel
