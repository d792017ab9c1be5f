#pragma once
// The data plane carries the tensor traffic between a worker and a shard in
// different processes (pushes and their acks, pulls and their replies) over
// TCP connections of its own, while CAF's middleman keeps carrying control
// (spawns, directory, heartbeats, checkpoints, recovery). CAF's path copies
// a frame into its serializer's buffer, queues it on the one middleman
// thread and copies it again out of the deserializer; here a frame's capnp
// segments go from the frame's own memory to the socket in one writev, and
// arrive in one read into a pooled (already faulted) buffer that becomes the
// received frame. What a message means is unchanged: the shard validates,
// deduplicates and acknowledges exactly as it does for a CAF message, so
// exactly-once and replay hold on either path.
//
// One object per process (`data_plane::start`): a listening socket for
// peers' requests and, per peer node, one outgoing connection opened on
// first use. Local actors see two actors:
//   - a forwarder per outgoing connection (`route`): a worker sends it
//     `request(fwd, timeout, dp_forward_atom, shard, push_msg)` (or a
//     pull_request_msg) and gets the shard's push_ack_msg (pull_reply_msg)
//     back as the response, or an error when the connection fails, the shard
//     is not served there or the peer's answer is an error;
//   - a gateway per incoming connection, which makes the request to the
//     local shard and writes its answer back.
// A destination with no route (its node unknown, or its connection failed
// in the last `reconnect_after`) gets an invalid handle from `route`: the
// caller then uses CAF's path, so the data plane is never needed for
// correctness. Routes come from the coordinator: each node's data-plane port
// is in its NodeJoin, worker spawn requests carry every node's, and a node
// that comes back is announced to the others (node_routes_atom). Threads:
// one accepting, two per connection (writer, reader).
//
// Authentication: each connection starts with a challenge-response over the
// cluster secret in both directions, bound to both sides' CAF node ids
// (labels keep the directions apart); the connecting side also checks that
// the listener is the node its route names. A peer that fails it, or later
// sends bytes that are not a well-formed header or capnp frame, is logged
// and its connection closed; nothing it sent is delivered. Only actors this
// process registered with `serve` (its shards) can be addressed. With
// cfg.tls every connection runs TLS first (actors/net/tls.hpp) and carries all
// of the above inside it; without, the traffic is not encrypted.
//
// Wire format after the handshake, both directions: a 32-byte header
// {u32 magic "KDP1", u32 kind, u64 slot, u64 target actor id, u64 length}
// (little-endian) followed by `length` bytes: a capnp stream encoding
// (push, pull request, push ack, pull reply) or an error text.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/net/cluster_secret.hpp"
#include "actors/net/tls.hpp"

namespace keel {

// (dp_forward_atom, caf::actor shard, push_msg | pull_request_msg) to a
// forwarder; the answer is the shard's own.
using dp_forward_atom = caf::atom_constant<caf::atom("dp_fwd")>;

struct data_plane_config {
  std::string host = "127.0.0.1";  // where the listener binds
  uint16_t port = 0;               // 0: the OS picks one
  cluster_secret secret;
  // TLS on every connection (null: none): certificates verified both ways,
  // the listener's against its route's name; the secret's handshake then
  // runs inside TLS. A peer refused by TLS is logged like any refusal.
  std::shared_ptr<const tls_context> tls;
  // Bounds each connect and handshake.
  std::chrono::milliseconds connect_timeout{1000};
  // A gateway's bound on the local shard's answer (the shard holds a pull
  // until its consistency rule allows it); the worker's own timeout is
  // usually shorter and it retries.
  std::chrono::milliseconds answer_timeout{60000};
  // After a connection to a node fails, `route` answers "no route" (CAF's
  // path) for this long before trying again.
  std::chrono::milliseconds reconnect_after{1000};
  // Incoming connections open at once (handshaking or served); more are
  // refused and logged, so a flood cannot exhaust the node's threads.
  // Refusals name the peer's address and the port; past 20 a second they
  // are counted and summarised instead of logged one by one.
  size_t max_incoming = 256;
  // One line per event (connections, refusals, failures); thread-safe. Null:
  // standard error, prefixed "keel data plane: ".
  std::function<void(const std::string&)> log;
};

struct data_plane_stats {
  uint64_t connections_out = 0;  // opened (handshake done)
  uint64_t connections_in = 0;   // accepted (handshake done)
  uint64_t refused = 0;          // incoming connections that failed the handshake or sent bad bytes
  uint64_t requests_out = 0;     // pushes and pulls forwarded
  uint64_t requests_in = 0;      // pushes and pulls delivered to local shards
  uint64_t bytes_out = 0;        // frame bytes written (requests and answers)
  uint64_t bytes_in = 0;         // frame bytes read
};

class data_plane {
 public:
  // Listens on cfg.host:cfg.port. Errors: invalid_argument (no secret),
  // io_error naming the address when it cannot listen.
  static caf::expected<std::shared_ptr<data_plane>> start(caf::actor_system& sys, data_plane_config cfg);

  // The listening port (the OS's pick when cfg.port was 0).
  uint16_t port() const;
  // This process's CAF node id as text (what peers' routes name).
  const std::string& node() const;

  // Lets peers address `local` until it terminates.
  void serve(const caf::actor& local);

  // Where node `node` (its CAF node id as text) listens, and with TLS the
  // name its certificate must state (empty: `host`). A later call for the
  // same node replaces the address; a route to this process's own node is
  // ignored (its shards are local).
  void add_route(const std::string& node, const std::string& host, uint16_t port,
                 const std::string& tls_name = {});

  // The forwarder for `dest`'s node, or an invalid handle: dest is local or
  // invalid, its node has no route, or its last connection failed less than
  // reconnect_after ago. Connecting happens in the background: requests
  // sent meanwhile wait for it (and fail with it).
  caf::actor route(const caf::actor& dest);

  data_plane_stats stats() const;

  // Closes every connection and the listener and joins their threads;
  // pending requests fail. Idempotent; the destructor calls it.
  void stop();

  ~data_plane();
  data_plane(const data_plane&) = delete;
  data_plane& operator=(const data_plane&) = delete;

  struct impl;

 private:
  explicit data_plane(std::shared_ptr<impl> p) : impl_(std::move(p)) {}
  std::shared_ptr<impl> impl_;
};

}  // namespace keel
