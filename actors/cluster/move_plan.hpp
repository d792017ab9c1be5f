#pragma once
// A move_plan decides a running cluster's membership changes as plain
// values, beside placement_policy (which says where children run): which
// child moves next (rebalances, operators' moves and drains, one at a
// time, in the order queued), when the move under way has settled, which
// drains may begin and which drained nodes are let go. It holds the queue,
// the move under way, the targets pinned for restarts and which nodes were
// released; it changes the policy it is given only where documented (a
// drained node is marked draining, a released one dead). No actors, no
// I/O, no clock: cluster_membership.cpp carries out what it decides
// (asking the job to stop a child, telling the timeline). Not thread-safe:
// one owner.
//
// A move stops its child; the supervisor restarts it from its last
// checkpoint and the placement's start puts it on the move's target (or,
// for a drain, wherever the policy says). The move ends once the child has
// started again and a checkpoint at or past the step the job stood at when
// it stopped the child has committed (0: the job has no checkpoints to wait
// for). Only then does the next move stop another child: a worker stopped
// while a moved shard still needs its log, or a shard restored from before
// a moved worker's restart, would force a rollback.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/cluster/placement_policy.hpp"
#include "actors/core/actor_id.hpp"

namespace keel {

// A child to stop so that it starts elsewhere: on `to` (a rebalance or an
// operator's move), or wherever the policy says (a drain).
struct pending_move {
  actor_id child;
  std::optional<uint32_t> to;
  std::string why;
};

// What the queue says when it may advance.
struct next_step {
  std::optional<pending_move> move;  // stop this child now (after a pre-copy, if any)
  std::vector<uint32_t> released;    // drained nodes let go (now dead in the policy)
  std::string balanced;              // every eligible node's load, once moves ended (empty: nothing to say)
};

// What a drain request comes to.
struct drain_decision {
  enum class outcome { begun, waiting, refused };
  outcome what = outcome::begun;
  std::string why;  // refused: why not
};

class move_plan {
 public:
  // Nodes, by index, as the policy has them: add one for each node added.
  void add_node(bool released = false) { released_.push_back(released); }
  // A drained node let go: it takes nothing again and is not reconnected.
  bool released(uint32_t node) const { return node < released_.size() && released_[node]; }

  // An operator's move of `child` to `node`: queued, or why not.
  std::optional<std::string> request_move(const placement_policy& p, actor_id child, uint32_t node);
  // Queues the moves that balance the cluster now (a node joined), each
  // with why "rebalance onto node:N"; returns them.
  std::vector<std::pair<actor_id, uint32_t>> queue_rebalance(const placement_policy& p);

  // A drain of `node`: begun (marked draining, its children queued, shards
  // first), waiting for another node to move to (none takes children now but
  // one may come back), or refused.
  drain_decision drain(placement_policy& p, uint32_t node);
  // Begins the drains that waited, where a node to move to is live now;
  // returns the nodes whose drain began.
  std::vector<uint32_t> resume_drains(placement_policy& p);
  bool drain_waits(uint32_t node) const { return waiting_drains_.count(node) > 0; }

  // The next move, unless one is under way: the next queued move that still
  // applies (its child runs on a live node: a draining one for a drain,
  // another than a target that still takes it otherwise); when the queue ran
  // out after moves, once more the moves that balance the cluster now (a
  // join's plan was made for the loads then). With none left: drained nodes
  // with nothing on them are released, and after moves the loads reported.
  // A move to a target pins it (pin_of).
  next_step next(placement_policy& p);

  // The job stopped the moving child (it then stood at step `settle_at`).
  // True when the move has settled (the next may start).
  bool stopped(actor_id child, uint64_t settle_at);
  // The job did not stop `child` (it ended, or the child was not running):
  // its move is dropped.
  void not_stopped(actor_id child);
  // `child` started: if a move stopped it, why (once). Unpins it.
  std::optional<std::string> started(actor_id child);
  // The newest checkpoint committed stands at `step` (its slowest shard).
  void committed(uint64_t step);
  // Ends the move under way if it has settled; true when it did.
  bool settle();

  // The node a restart of `child` tries first (a move's target), if any.
  std::optional<uint32_t> pin_of(actor_id child) const;
  void pin(actor_id child, uint32_t node) { pinned_[child] = node; }

  const std::optional<actor_id>& moving() const { return moving_; }
  size_t queued() const { return queue_.size(); }
  uint64_t committed_step() const { return committed_step_; }

 private:
  std::optional<pending_move> take_next(const placement_policy& p);
  std::vector<uint32_t> release_drained(placement_policy& p);
  void begin_drain(placement_policy& p, uint32_t node);

  std::deque<pending_move> queue_;
  std::optional<actor_id> moving_;
  std::string moving_why_;
  bool moving_started_ = false;
  std::optional<uint64_t> settle_step_;
  uint64_t committed_step_ = 0;
  std::map<actor_id, uint32_t> pinned_;
  std::vector<bool> released_;         // by node
  std::set<uint32_t> waiting_drains_;  // drains waiting for another node to move to
  bool moved_since_balanced_ = false;  // a move ran since the last "moves done"
  bool rebalanced_ = false;            // the queue's final balancing pass was planned
};

// Nodes other than `node` that take children and are not client processes.
uint32_t eligible_besides(const placement_policy& p, uint32_t node);

}  // namespace keel
