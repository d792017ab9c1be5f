#pragma once
// A cluster_placement runs a job's shards and workers on keel node processes
// (`keel node`, actors/cluster/node_agent.hpp): the job's process (the coordinator)
// keeps root, the directory, the supervisors and the checkpointer, and asks
// the nodes' agents to start each shard and worker. Where each goes is
// placement_policy's choice (actors/cluster/placement_policy.hpp): shard i
// first starts on node (i mod N), workers likewise after the shards; a
// restarted child goes to the least loaded live node (shards by bytes,
// workers by count), so a dead node's children spread over the survivors,
// and each such move is a `placed` event in the job's timeline. Shards are
// weighed by their committed checkpoints (committed()). The placement
// monitors every node's agent: a node's death (its
// connection lost, or no heartbeat within the connection timeout for a hung
// one) becomes a node_down event for the job naming the children it ran,
// and a node that answers again at its address (restarted on the same port)
// is reconnected and announced with node_up. Storage must be reachable from
// every node at the same path: one machine, or a shared filesystem.
//
// Peer copies (`peer_copy`, actors/ps/snapshot_replica.hpp): a shard placed
// on node i sends each checkpoint file it writes to the replica of its peer,
// the first live node after i (i+1, i+2, ... mod N; none when i is the only
// live node). A restart of the shard goes there first while it lives,
// load or not, so that the restarted shard reads its chain from its own
// process's memory: with copies on, a dead node's shards all go to its
// peer, as before the policy. A restart is told the replica its previous incarnation sent to
// (restore_replica) while that node is live; the directory serves the rest.
// Nodes not joined to each other reach one another through the coordinator
// (CAF's routing; automatic connections are off): the copies then pass
// through the coordinator's process, which is why keel cluster leaves it off
// unless asked.
// Thread-safe: supervisors' start threads call start_* concurrently.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actors/cluster/node_address.hpp"
#include "actors/cluster/node_client.hpp"
#include "actors/cluster/node_protocol.hpp"
#include "actors/job/placement.hpp"
#include "actors/net/cluster_secret.hpp"

namespace keel {


struct cluster_placement_config {
  std::vector<node_address> nodes;  // at least one
  cluster_secret secret;
  // TLS to every node (null: none): each node's certificate must state its
  // address's identity(); the nodes' data planes are told the same names.
  std::shared_ptr<const tls_context> tls;
  model_spec model;                 // how the nodes build the model (workers; shards with tables)
  cluster_settings settings;        // heartbeat and connection timeout
  std::chrono::milliseconds spawn_timeout{5000};
  // With every node lost, a child's start waits for one to be live again
  // (respawned, restarted on its port, added) while none has been for
  // `node_wait`; after that its start fails at once ("none has been live
  // for ..."), its supervisor's restarts exceed their intensity, and the
  // job fails, naming it, instead of waiting forever.
  std::chrono::milliseconds node_wait{30000};
  std::chrono::milliseconds reconnect_every{250};  // trying lost nodes again
  // Asking a live node which nodes joined it (`keel node --join` to any
  // node of the job): each one the job does not know yet is added as a
  // join:node:N of the plan would be (add_node).
  std::chrono::milliseconds discover_every{500};
  bool peer_copy = false;  // see above
  // Pre-copies (actors/ps/shard_standby.hpp): before a move stops a shard,
  // the node it moves to restores the shard's newest committed chain while
  // the shard still serves, so the restart there takes that state instead
  // of reading the chain then. How long a pre-copy may take before the move
  // goes ahead without it.
  bool pre_copy = true;
  std::chrono::milliseconds pre_copy_timeout{60000};
  // Every worker of the job runs an application's own loop
  // (job_config::application_loop) in a client process
  // (keel::cluster_client, actors/cluster/cluster_client.hpp) that joined a
  // node of the job: worker w runs only in a client that serves w, and
  // stays there. The job begins once a client serves each of its
  // `client_workers` workers (attach() waits up to `client_wait`); a
  // worker whose client is lost restarts once a client serving it joins
  // again (node_wait bounds the wait, as for nodes). 0: keel's own workers.
  uint32_t client_workers = 0;
  std::chrono::milliseconds client_wait{120000};
  // At most this many of keel's own workers on a node (0: no bound;
  // keel cluster --worker-slots). A worker with no free slot on any node
  // (after a node's loss, say) waits for one for `node_wait`, as for a
  // node, and then asks the job whether it may leave instead
  // (training_config::min_workers, keel cluster --workers MIN:MAX); a
  // worker whose client is lost likewise.
  uint32_t worker_slots = 0;
};

class cluster_placement final : public child_placement {
 public:
  explicit cluster_placement(cluster_placement_config cfg);
  ~cluster_placement() override;

  void configure(caf::actor_system_config& cfg) override;
  caf::error attach(caf::actor_system& sys, const caf::actor& job) override;
  caf::expected<caf::actor> start_shard(caf::actor_system& sys, uint64_t incarnation,
                                        const parameter_shard_config& cfg) override;
  caf::expected<caf::actor> start_worker(caf::actor_system& sys, uint64_t incarnation,
                                         const worker_config& cfg) override;
  void committed(const std::vector<committed_shard>& shards) override;
  void detach() override;
  uint32_t nodes() const override;  // grows with joins
  caf::error drain(uint32_t node) override;

  // Adds the keel node at `address` to the running job (a plan's
  // join:node:N, N being nodes()): connects to it as to the others
  // (authenticated the same way), then moves shards and workers to it
  // until the cluster is balanced (placement_policy::rebalance). Blocks
  // for the connection; the moves follow. Before attach(), it joins the
  // list of nodes to start on.
  caf::error add_node(const node_address& address);
  std::string where() const override;
  uint32_t application_loops() const override { return cfg_.client_workers; }
  std::chrono::milliseconds longest_wait() const override { return cfg_.node_wait; }
  // A start's own bounds: its rounds until spawn_timeout, the last round's
  // spawns (spawn_timeout a node), the job's answer for a worker that
  // leaves; with room for nodes that join.
  std::chrono::milliseconds longest_start() const override {
    return (2 * nodes() + 4) * cfg_.spawn_timeout + cfg_.node_wait;
  }

  // An operator's requests (keel admin, actors/cluster/cluster_admin.hpp).
  // Queues a move of `child` (a shard or worker) to `node`, which must take
  // children; it runs as a rebalance's moves do, after those queued before.
  caf::error move(actor_id child, uint32_t node);
  // An operator's change of the job's workers ("join:worker:W" or
  // "leave:worker:W", keel admin): asks the job (job::change_workers) and
  // returns the step it takes effect at. Any thread.
  caf::expected<uint64_t> change_workers(const std::string& item);
  // A membership event about `node` in the job's timeline.
  void note(uint32_t node, std::string detail);
  // Every node (address, state: live, lost, draining, waiting to drain,
  // released; its shards, their bytes, its workers, its children), the move
  // under way and the queued ones, as one JSON object.
  std::string status_json() const;

  // The node a child runs on now (-1: none), for tests.
  int node_of(actor_id child) const;

  struct state;  // shared with the watcher actor (cluster_placement_state.hpp)

 private:
  caf::expected<caf::actor> start(uint32_t preferred, spawn_request req);
  // With client_workers: waits until a client serves each worker.
  caf::error await_clients();

  cluster_placement_config cfg_;
  std::shared_ptr<state> state_;
};

}  // namespace keel
