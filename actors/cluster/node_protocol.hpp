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
//   (nodes_atom)                         -> vector<node_info>  live nodes
//   (node_status_atom)                   -> node_status
//   heartbeat_msg                        (one way, between joined nodes)

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/core/partition.hpp"
#include "actors/core/shard_core.hpp"
#include "messages/protocol.hpp"
#include "messages/wire_bits.hpp"
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

struct shard_spawn {
  shard_config config;
  std::vector<float> initial_dense;  // used without a snapshot
  shard_snapshot_msg snapshot;       // restart from it when not empty
  uint64_t snapshot_every_steps = 0;
  caf::actor directory;              // where it finds "checkpointer" (may be invalid)
};

// Where a node's data plane listens (actors/data_plane/data_plane.hpp).
struct data_route {
  std::string node;  // its CAF node id, as to_string renders it
  std::string host;
  uint16_t port = 0;
  std::string tls_name;  // with TLS: the name its certificate states (empty: host)
};

struct worker_spawn {
  uint32_t worker = 0;
  uint32_t num_workers = 1;
  model_spec model;
  std::vector<shard_keys> parts;
  std::vector<std::string> shard_names;
  caf::actor directory;
  caf::actor job;
  uint64_t seed = 1;
  uint32_t batch_size = 32;
  uint64_t total_steps = 100;
  uint32_t request_timeout_ms = 2000;
  uint32_t retry_min_ms = 5;
  uint32_t retry_max_ms = 500;
  uint32_t epoch = 0;
  consistency_kind rule = consistency_kind::bsp;
  bool windowed = false;
  std::vector<data_route> routes;  // the nodes' data planes when the job started
};

struct checkpointer_spawn {
  std::string dir;  // absolute: every node must reach the same directory
  uint64_t keep_last = 3;
  uint32_t num_shards = 1;
  caf::actor job;
  uint32_t incomplete_timeout_ms = 5000;
};

// `kind` is "shard", "worker" or "checkpointer"; only the matching member is
// read. `name` and `incarnation` are for the node's log.
struct spawn_request {
  std::string kind;
  std::string name;
  uint64_t incarnation = 1;
  shard_spawn shard;
  worker_spawn worker;
  checkpointer_spawn checkpointer;
};

spawn_request make_spawn_request(std::string name, shard_spawn s);
spawn_request make_spawn_request(std::string name, worker_spawn w);
spawn_request make_spawn_request(std::string name, checkpointer_spawn c);

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
};

// Registers the types above, the protocol's capnp messages and the
// directory's updates (which a remote shard or worker receives) with `cfg`.
void register_node_types(caf::actor_system_config& cfg);

// ---- inspect: the field order is the wire format ----

// wire::bits, wire::float_vector_bits: messages/wire_bits.hpp

template <class I>
typename I::result_type inspect(I& f, key_range& x) {
  return f(caf::meta::type_name("keel.key_range"), x.begin, x.end);
}
template <class I>
typename I::result_type inspect(I& f, consistency& x) {
  return f(caf::meta::type_name("keel.consistency"), x.kind, x.staleness);
}
template <class I>
typename I::result_type inspect(I& f, optimizer_config& x) {
  using wire::bits;
  return f(caf::meta::type_name("keel.optimizer_config"), x.kind, bits(x.lr), bits(x.momentum), bits(x.beta1),
           bits(x.beta2), bits(x.epsilon), bits(x.initial_accumulator));
}
template <class I>
typename I::result_type inspect(I& f, shard_config& x) {
  return f(caf::meta::type_name("keel.shard_config"), x.shard, x.num_workers, x.dense, x.sparse, x.rule,
           x.optimizer);
}
template <class I>
typename I::result_type inspect(I& f, shard_keys& x) {
  return f(caf::meta::type_name("keel.shard_keys"), x.dense, x.sparse);
}
template <class I>
typename I::result_type inspect(I& f, model_spec& x) {
  return f(caf::meta::type_name("keel.model_spec"), x.name, x.data_dir, x.options);
}
template <class I>
typename I::result_type inspect(I& f, shard_spawn& x) {
  return f(caf::meta::type_name("keel.shard_spawn"), x.config, wire::float_vector_bits{x.initial_dense}, x.snapshot,
           x.snapshot_every_steps, x.directory);
}
template <class I>
typename I::result_type inspect(I& f, data_route& x) {
  return f(caf::meta::type_name("keel.data_route"), x.node, x.host, x.port, x.tls_name);
}
template <class I>
typename I::result_type inspect(I& f, worker_spawn& x) {
  return f(caf::meta::type_name("keel.worker_spawn"), x.worker, x.num_workers, x.model, x.parts,
           x.shard_names, x.directory, x.job, x.seed, x.batch_size, x.total_steps, x.request_timeout_ms,
           x.retry_min_ms, x.retry_max_ms, x.epoch, x.rule, x.windowed, x.routes);
}
template <class I>
typename I::result_type inspect(I& f, checkpointer_spawn& x) {
  return f(caf::meta::type_name("keel.checkpointer_spawn"), x.dir, x.keep_last, x.num_shards, x.job,
           x.incomplete_timeout_ms);
}
template <class I>
typename I::result_type inspect(I& f, spawn_request& x) {
  return f(caf::meta::type_name("keel.spawn_request"), x.kind, x.name, x.incarnation, x.shard, x.worker,
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
           x.rejected, x.banned_peers);
}

}  // namespace keel
