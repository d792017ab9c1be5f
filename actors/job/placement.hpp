#pragma once
// A child_placement decides where a job's shards and workers run. Without
// one, a job starts them in its own process. A cluster placement
// (actors/cluster/cluster_placement.hpp, in keel_cluster) starts them on keel node
// processes instead, through their agents: the job's supervisors call
// start_shard / start_worker from their start functions exactly as they
// spawn local children, monitor the handles they get back (a node's death
// takes its children down, and the supervisor restarts them, from their last
// snapshot, wherever the placement says), and nothing else in the job
// changes. The checkpointer, the directory and the supervisors stay in the
// job's process (the coordinator).
//
// Every call blocks its caller at most for the placement's own timeouts and
// fails with an error naming the child and the node(s) it tried; starts are
// called on threads of their own (supervision/own_thread_start.hpp: never a
// scheduler thread, which a supervisor runs on), concurrently, so
// implementations are thread-safe.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/core/checkpoint_coordinator.hpp"
#include "messages/errors.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/worker.hpp"

namespace keel {

class child_placement {
 public:
  virtual ~child_placement() = default;

  // Called once, before the job's actor system exists: load what the
  // placement needs (CAF's middleman, message types).
  virtual void configure(caf::actor_system_config& cfg) = 0;

  // Called once the system exists and before the tree starts. `job` is the
  // job's own actor: the placement reports node events to it as job_events
  // (event_kind::node_down, node_up). Fails when no node can be reached.
  virtual caf::error attach(caf::actor_system& sys, const caf::actor& job) = 0;

  // Starts incarnation `incarnation` of the shard or worker `cfg` describes
  // (shard:cfg.core.shard, worker:cfg.core.worker). A worker's model crosses
  // by the placement's own model description; what a local spawn gets
  // beside the config (the env: model object, link faults) stays in the
  // job's process.
  virtual caf::expected<caf::actor> start_shard(caf::actor_system& sys, uint64_t incarnation,
                                                const parameter_shard_config& cfg) = 0;
  virtual caf::expected<caf::actor> start_worker(caf::actor_system& sys, uint64_t incarnation,
                                                 const worker_config& cfg) = 0;

  // A checkpoint committed: `shards` name each shard's files and their
  // bytes, which a placement may weigh its shards by. Called on the job's
  // thread.
  virtual void committed(const std::vector<committed_shard>& shards) { (void)shards; }

  // Drains `node` (a plan's drain:node:N): moves what runs there to the
  // other nodes, one child at a time, by asking the job to stop each
  // (move_atom); the node then takes nothing new. Returns once the drain
  // has begun; an error when it cannot (no such live node, none left to
  // move to, or a placement without nodes).
  virtual caf::error drain(uint32_t node) {
    return make_error(errc::invalid_argument, "no node:" + std::to_string(node) + " to drain: the job runs in one process");
  }

  // Called before the job's actor system goes: stops every actor the
  // placement runs in it (the system waits for them).
  virtual void detach() = 0;

  // How many node processes the placement spreads children over (fault
  // plans may target node:0 .. node:N-1).
  virtual uint32_t nodes() const = 0;

  // Where each child runs now, as "name@node:N" lines, for errors and events.
  virtual std::string where() const = 0;

  // The longest one start_shard or start_worker call may take: the job's
  // supervisors run each on a thread of its own and give up on it after
  // this (a failed start), so it lies above every bound of the placement's
  // own.
  virtual std::chrono::milliseconds longest_start() const = 0;

  // How many workers it starts in the processes of an application that
  // runs their loops (job_config::application_loop with a cluster:
  // keel::cluster_client); 0: none, the workers run their model's loop.
  virtual uint32_t application_loops() const { return 0; }

  // The longest a start may wait for a node, a worker slot or a client
  // before it fails (or its worker leaves): part of the job's stall timeout
  // (stall_timeout_for, job.hpp).
  virtual std::chrono::milliseconds longest_wait() const { return std::chrono::milliseconds{0}; }
};

}  // namespace keel
