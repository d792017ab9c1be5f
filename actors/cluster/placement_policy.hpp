#pragma once
// Where a cluster's children run: a pure value that cluster_placement
// owns under its lock (no actors, no I/O), so that the policy reads and
// tests on its own.
//  - A first start goes to the node the child's index prefers (shard i on
//    node i mod N, worker w on node (shards + w) mod N) while it is live:
//    the layout is balanced by construction and the same in every run.
//  - A restart goes to the live node with the least load, not to the
//    next one: so a dead node's children spread over the survivors.
//    A shard's load is bytes: the node holding the fewest shard bytes wins
//    (counted in quarters of a mean shard, so that a few bytes do not
//    outweigh a child), then the one with the fewest children. A worker's load is workers:
//    the node hosting the fewest wins, then the one with the fewest shard
//    bytes. Remaining ties go to the first live node after the one the
//    child ran on, which comes last of all: it may have just died, before
//    its death was seen, and a spawn there would only time out.
//  - A shard weighs the bytes of its newest committed checkpoint (base plus
//    deltas, an upper bound of what it holds), until it has one its config's
//    estimate (dense and sparse values with their optimizer slots).
// A choice is a reservation: the child counts on its new node at once, so
// a dead node's children, restarted one after another, see each other.
//
// Membership: a draining node takes nothing new (its children leave it one
// move at a time, each restarted where candidates() says); a node added to
// a running job starts empty, and rebalance() lists the moves that even the
// load out again: from the node with the most shard bytes to the one with
// the fewest, while a shard lighter than their difference by a quarter of
// a mean shard is there to move (each move lowers the spread; shards a few
// bytes apart stay where they are), then workers likewise while the
// counts differ by more than one. The moves run one at a time (a bound of
// one shard's state in flight at once; cluster_placement).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/actor_id.hpp"

namespace keel {

struct node_load {
  uint64_t shard_bytes = 0;
  uint32_t shards = 0;
  uint32_t workers = 0;
  uint32_t children() const { return shards + workers; }
};

class placement_policy {
 public:
  explicit placement_policy(uint32_t nodes) : alive_(nodes, true), draining_(nodes, false), serves_(nodes) {}

  uint32_t nodes() const { return static_cast<uint32_t>(alive_.size()); }
  bool alive(uint32_t node) const { return node < alive_.size() && alive_[node]; }
  void set_alive(uint32_t node, bool alive) { alive_.at(node) = alive; }
  // A new node, live and empty: its index.
  uint32_t add_node();
  // `node` is a client process running the loops of `workers` (not empty).
  void set_client(uint32_t node, std::vector<uint32_t> workers) { serves_.at(node) = std::move(workers); }
  bool client(uint32_t node) const { return node < serves_.size() && !serves_[node].empty(); }
  bool serves(uint32_t node, uint32_t worker) const;
  // The workers client `node` runs (empty: a node).
  std::vector<uint32_t> served(uint32_t node) const { return client(node) ? serves_[node] : std::vector<uint32_t>{}; }
  // Every worker of the job runs an application's loop in a client process.
  void set_client_loops(bool on) { client_loops_ = on; }
  bool client_loops() const { return client_loops_; }
  // Whether `node` takes `child` now: eligible, of the right kind (above),
  // and for a worker a free worker slot.
  bool takes(uint32_t node, actor_id child) const;
  // At most `slots` workers on a node (0: no bound; clients run theirs):
  // a worker no node has a slot for waits, and may leave the job
  // (cluster_placement, training_config::min_workers).
  void set_worker_slots(uint32_t slots) { worker_slots_ = slots; }
  uint32_t worker_slots() const { return worker_slots_; }
  // Whether `node` takes children: live and not draining.
  bool eligible(uint32_t node) const { return alive(node) && !draining_[node]; }
  bool draining(uint32_t node) const { return node < draining_.size() && draining_[node]; }
  void set_draining(uint32_t node, bool on) { draining_.at(node) = on; }

  // The moves (child, to node) that balance the eligible nodes, in order.
  std::vector<std::pair<actor_id, uint32_t>> rebalance() const;

  // The nodes to try for `child`, best first, every node that takes it
  // once (empty: none does). `incarnation` 1 is a first start, `preferred` the node
  // its index prefers.
  std::vector<uint32_t> candidates(actor_id child, uint64_t incarnation, uint32_t preferred) const;

  // `child` now runs on `node` (it leaves the node it ran on).
  void place(actor_id child, uint32_t node);
  // `child` runs nowhere any more (a worker that left the job).
  void forget(actor_id child);
  // What a shard weighs from now on (its newest committed checkpoint's bytes).
  void weigh(actor_id shard, uint64_t bytes);
  // What a shard weighs until weigh() says (its config's estimate).
  void estimate(actor_id shard, uint64_t bytes);

  // The node `child` runs on (or ran on last), if any.
  std::optional<uint32_t> node_of(actor_id child) const;
  // The load of `node` (what runs there, dead or alive).
  node_load load(uint32_t node) const;
  // The children on `node`, in id order.
  std::vector<actor_id> children_of(uint32_t node) const;
  const std::map<actor_id, uint32_t>& placed() const { return placed_; }
  // What a shard weighs now (0: not known).
  uint64_t weight_of(actor_id shard) const { return weight(shard); }

 private:
  uint64_t weight(actor_id child) const;
  // A quarter of a mean shard's weight (at least 1): the unit shard bytes
  // count in, when placing and when balancing.
  uint64_t quantum() const;

  std::vector<bool> alive_;
  std::vector<bool> draining_;
  std::vector<std::vector<uint32_t>> serves_;  // by node: the workers a client runs (empty: a node)
  bool client_loops_ = false;
  uint32_t worker_slots_ = 0;
  std::map<actor_id, uint32_t> placed_;  // child -> node
  std::map<actor_id, uint64_t> bytes_;   // shard -> its weight
};

// A shard's weight before its first checkpoint: `values` floats (dense and
// sparse) with `slots` optimizer slots each, 4 bytes a float.
uint64_t estimated_shard_bytes(uint64_t values, uint32_t slots);

// Descriptions for the job's timeline and the operator's status.
// "2 shards (3.1 kB) and 2 workers".
std::string describe_load(const node_load& load);
// "it runs the loops of worker:0, worker:2" for a client process.
std::string describe_client(const placement_policy& p, uint32_t node);
// "3.1 kB", "6.6 MB".
std::string readable_bytes(uint64_t bytes);

}  // namespace keel
