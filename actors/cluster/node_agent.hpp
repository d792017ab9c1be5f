#pragma once
// A node agent is the one actor a keel node serves, behind the node's gate
// (actors/cluster/cluster_gate.hpp: CAF only ever sees peers that proved the
// cluster secret on the raw socket). It starts shards, workers and
// checkpointers in its process on request from authenticated peers,
// returns their handles (the requester monitors them; CAF proxies carry the
// monitor across processes), exchanges heartbeats with the nodes that
// joined it, and lists the live ones. The protocol it speaks is in
// actors/cluster/node_protocol.hpp; actors/cluster/node_client.hpp is its client side.
//
// Authentication (challenge-response, per CAF node id of the sender), a
// second check behind the gate's that ties membership to CAF node ids:
//   1. peer -> agent: (hello, NodeJoin{node, challenge Cp})
//      agent -> peer: NodeJoin{agent's node, challenge Ca,
//                     proof = HMAC(secret, agent label, Cp, agent's node)}
//      The peer checks the proof: the agent knows the secret.
//   2. peer -> agent: (auth, NodeJoin{node, proof = HMAC(secret, peer label,
//                     Ca, peer's node)}, peer's agent or invalid)
//      The agent checks the proof against the challenge it issued to that
//      CAF node (single use) and from then on serves every actor of that
//      node. A node's own actors are served without a handshake.
// Anything else from a node that has not completed the handshake is refused,
// logged ("refused spawn from node X: not authenticated ...") and not acted
// on. A peer whose bytes fail validation (a capnp frame in a join, heartbeat
// or spawn request) gets the decoder's named error and is refused for good
// (its node id is banned; CAF 0.17 offers no call that closes one peer's
// connection, so it stays open but unserved).
//
// Threat model: the secret proves membership; it is never sent, and a
// recorded handshake cannot be replayed (fresh challenges, bound to node
// ids). Traffic is NOT encrypted or integrity-protected: anyone on the path
// can read parameters and could inject messages into an authenticated
// connection. Use it on a trusted network (one host, a private subnet);
// where the network is not trusted, run the middleman over TLS with mutual
// certificates (libcaf_openssl, CAF::openssl) instead of or as well as this.
// Validation of spawn requests bounds what a member can ask for, but a member
// is trusted with the node's resources and the directories it names. Exit
// messages from other processes, and anonymous ones (which a peer can send
// too; CAF's anon_send_exit names the receiver itself as the source), are
// ignored and logged: only a sending actor of the node's own process stops
// the agent. CAF 0.17 gives no hook to refuse exit_reason::kill, which no
// actor can trap, and BASP lets any connected peer address every actor a
// node published or ever sent a handle of, by its (small, sequential) id:
// that is why strangers are stopped at the gate, before BASP (tested in
// tests/cluster/node_gate_test.cpp). A member can still kill the agent;
// `keel node` then ends, exit 1.
// Children are not protected either: a member gets their handles.
//
// A child lives as long as the job it serves: the agent monitors the job's
// actor the request names (a shard's directory, a worker's or
// checkpointer's job) and stops that job's children here when it goes down
// (the job's process died, or dropped this node while it was stopped), so a
// dead coordinator leaves no orphans and a node back from SIGSTOP drops the
// actors the job has already restarted elsewhere.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/net/cluster_secret.hpp"

namespace keel {

class client_slots;
class data_plane;
class file_io;
class replica_store;

struct node_agent_config {
  std::string host = "127.0.0.1";  // where its gate listens (for NodeJoin)
  uint16_t port = 0;               // set once listening (see node_listening_atom)
  cluster_secret secret;
  std::chrono::milliseconds heartbeat_interval{200};
  // A joined node without a heartbeat this long is no longer listed as live.
  std::chrono::milliseconds peer_timeout{800};
  std::filesystem::path data_dir;  // MNIST data for models built here
  // The node's data plane (actors/data_plane/data_plane.hpp), announced in its joins:
  // shards started here are served on it, workers use it. Null: none.
  std::shared_ptr<data_plane> plane;
  // Where its replica keeps the copies of its peers' shards' checkpoints
  // (actors/ps/snapshot_replica.hpp), for the process to report. Null: one
  // of its own.
  std::shared_ptr<replica_store> replicas;
  // What the shards started here read and write files with (keel node's
  // faulty_io, armed by SIGUSR1 for the crash fault). Null: the real file system.
  std::shared_ptr<file_io> io;
  // A client process (keel::cluster_client): the workers whose loops it
  // runs, announced in its joins instead of the actor types a node starts;
  // it starts those workers only. Null: a node.
  std::shared_ptr<client_slots> clients;
  // One line per event (joins, refusals, spawns, nodes lost); must be
  // thread-safe. Null: standard error, prefixed "keel node: ".
  std::function<void(const std::string&)> log;
};

// Messages only the agent's own process may send it.
using node_listening_atom = caf::atom_constant<caf::atom("nd_listen")>;  // (atom, uint16_t port)
using node_joined_atom = caf::atom_constant<caf::atom("nd_joined")>;     // (atom, node_info)

// Spawns the agent; fails (invalid_argument) without a secret. Send it
// (node_listening_atom, port) once its gate listens, and (node_joined_atom,
// node_info) for a node this process joined through connect_node (which
// checked that node's proof). On an exit message from an actor of its own
// process (sent by an actor, not anonymously: see above) it stops its children, waits (at most 3 s) until they are down, then stops;
// wait for its down_msg before destroying the actor system.
caf::expected<caf::actor> spawn_node_agent(caf::actor_system& sys, node_agent_config cfg);

}  // namespace keel
