#pragma once
// The messages a node agent (actors/cluster/node_agent.hpp) answers, as they cross
// processes. Requests that start actors are plain structs with `inspect`, so
// CAF serializes them; actor handles inside them (a shard's or a worker's
// directory, a worker's job) become proxies on the receiving node. A model crosses
// by name and options: the node builds it with make_model. Every type here is
// registered by register_node_types; one that is not arrives empty.
//
//   (hello_atom, node_join_msg)          -> node_join_msg   handshake step 1
//   (auth_atom, node_join_msg, actor)    -> ok_atom         handshake step 2
//   (spawn_atom, spawn_request)          -> actor           authenticated only
//   (node_prepare_atom, spawn_request)   -> uint64_t        authenticated only: a
//                                        shard's pre-copy before its move here
//                                        (actors/ps/shard_standby.hpp), its bytes
//   (nodes_atom)                         -> vector<node_info>  live nodes
//   (node_status_atom)                   -> node_status
//   (node_replica_atom)                  -> actor  its snapshot_replica
//                                        (actors/ps/snapshot_replica.hpp)
//   heartbeat_msg                        (one way, between joined nodes)

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/core/actor_id.hpp"
#include "actors/ps/checkpointer.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/worker.hpp"
#include "messages/protocol.hpp"
#include "models/model_options_wire.hpp"

namespace caf {
class actor_system_config;
}

namespace keel {

using hello_atom = caf::atom_constant<caf::atom("nd_hello")>;
using auth_atom = caf::atom_constant<caf::atom("nd_auth")>;
using spawn_atom = caf::atom_constant<caf::atom("nd_spawn")>;
using nodes_atom = caf::atom_constant<caf::atom("nd_nodes")>;
using node_status_atom = caf::atom_constant<caf::atom("nd_status")>;
using node_replica_atom = caf::atom_constant<caf::atom("nd_replic")>;
using node_prepare_atom = caf::atom_constant<caf::atom("nd_prep")>;
// (node_routes_atom, std::vector<data_route>) -> ok: where the nodes' data
// planes listen now (a coordinator tells its nodes when one came back).
using node_routes_atom = caf::atom_constant<caf::atom("nd_routes")>;

// Labels that keep the two directions' proofs apart (no reflection).
constexpr const char* agent_proof_label = "keel-node-agent-proof-v1";
constexpr const char* peer_proof_label = "keel-node-peer-proof-v1";

// A model by name (see models/model_registry.hpp) with its options;
// `data_dir` empty means the node's own --data-dir (options.data_dir is
// not sent).
struct model_spec {
  std::string name;
  std::string data_dir;
  model_options options;
};

// Where a node's data plane listens (actors/data_plane/data_plane.hpp).
struct data_route {
  std::string node;  // its CAF node id, as to_string renders it
  std::string host;
  uint16_t port = 0;
  std::string tls_name;  // with TLS: the name its certificate states (empty: host)
};

// A worker's config (actors/ps/worker.hpp) with what a node needs to
// give it the rest of what a local spawn gets: the model by name and the
// nodes' data planes when the job started.
// With `application_loop` the worker runs the loop of an application in
// the node's process (a client process, keel::cluster_client): the node
// attaches that application's channel, and refuses when it runs none for
// this worker.
struct worker_spawn {
  worker_config config;
  model_spec model;
  std::vector<data_route> routes;
  bool application_loop = false;
};

// The actor types a node announces in its NodeJoin: "shard", "worker" and
// "checkpointer" for a node; a client process announces only
// client_worker_type(w) for each worker whose loop it runs.
std::string client_worker_type(uint32_t worker);  // "client:worker:W"
// The worker of a "client:worker:W" entry, or nothing for another text.
std::optional<uint32_t> parse_client_worker_type(const std::string& text);

// Starts `id`, an actor of kind shard, worker or checkpointer: only the
// config of that kind is read. `incarnation` is for the node's log. A shard
// whose config has tables also reads `shard_model`: the node builds that
// model and binds its initial rows to shard.seed (the rows a shard creates
// on first touch), so its layout's tables must be the config's.
struct spawn_request {
  actor_id id;
  uint64_t incarnation = 1;
  parameter_shard_config shard;
  model_spec shard_model;
  worker_spawn worker;
  checkpointer_config checkpointer;
};

spawn_request make_spawn_request(parameter_shard_config s, uint64_t incarnation = 1,
                                 model_spec model = {});  // shard:s.core.shard
spawn_request make_spawn_request(worker_spawn w, uint64_t incarnation = 1);  // worker:w.config.core.worker
spawn_request make_spawn_request(checkpointer_config c, uint64_t incarnation = 1);

struct node_info {
  std::string node;  // the CAF node id, as to_string renders it
  std::string host;
  uint16_t port = 0;
  caf::actor agent;
  int64_t last_heartbeat_ms_ago = 0;  // 0 for the answering node itself
};

struct node_status {
  std::string node;
  uint64_t children = 0;      // actors spawned here and still running
  uint64_t spawned = 0;       // spawn requests granted
  uint64_t refused = 0;       // requests refused (not authenticated, banned)
  uint64_t rejected = 0;      // spawn requests that failed validation
  uint64_t banned_peers = 0;  // peers refused for good after bad bytes
  // Its replica's copies of its peers' shards' checkpoints: their bytes in
  // memory, and how many files.
  uint64_t replica_bytes = 0;
  uint64_t replica_files = 0;
};

// Registers the types above, the protocol's capnp messages and the
// directory's updates (which a remote shard or worker receives) with `cfg`.
void register_node_types(caf::actor_system_config& cfg);

// ---- inspect: the field order is the wire format ----

// The configs' own inspect functions sit beside them (actors/core/,
// actors/ps/).

template <class I>
typename I::result_type inspect(I& f, model_spec& x) {
  return f(caf::meta::type_name("keel.model_spec"), x.name, x.data_dir, x.options);
}
template <class I>
typename I::result_type inspect(I& f, data_route& x) {
  return f(caf::meta::type_name("keel.data_route"), x.node, x.host, x.port, x.tls_name);
}
template <class I>
typename I::result_type inspect(I& f, worker_spawn& x) {
  return f(caf::meta::type_name("keel.worker_spawn"), x.config, x.model, x.routes, x.application_loop);
}
template <class I>
typename I::result_type inspect(I& f, spawn_request& x) {
  return f(caf::meta::type_name("keel.spawn_request"), x.id, x.incarnation, x.shard, x.shard_model, x.worker,
           x.checkpointer);
}
template <class I>
typename I::result_type inspect(I& f, node_info& x) {
  return f(caf::meta::type_name("keel.node_info"), x.node, x.host, x.port, x.agent,
           x.last_heartbeat_ms_ago);
}
template <class I>
typename I::result_type inspect(I& f, node_status& x) {
  return f(caf::meta::type_name("keel.node_status"), x.node, x.children, x.spawned, x.refused,
           x.rejected, x.banned_peers, x.replica_bytes, x.replica_files);
}

}  // namespace keel
