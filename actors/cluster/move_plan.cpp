#include "actors/cluster/move_plan.hpp"

#include <algorithm>

namespace keel {

namespace {

std::string name_of(uint32_t node) {
  return to_string(actor_id::node(node));
}

// Every node that takes children, with its load: "node:2 3 shards (4.4 kB)
// and 3 workers, node:3 ...".
std::string describe_loads(const placement_policy& p) {
  std::string out;
  for (uint32_t i = 0; i < p.nodes(); ++i)
    if (p.eligible(i))
      out += (out.empty() ? "" : ", ") + name_of(i) + " " + describe_load(p.load(i));
  return out;
}

}  // namespace

uint32_t eligible_besides(const placement_policy& p, uint32_t node) {
  uint32_t others = 0;
  for (uint32_t i = 0; i < p.nodes(); ++i)
    others += i != node && p.eligible(i) && !p.client(i);
  return others;
}

std::optional<std::string> move_plan::request_move(const placement_policy& p, actor_id child, uint32_t node) {
  auto at = p.node_of(child);
  if (!at || !(child.is(actor_kind::shard) || child.is(actor_kind::worker)))
    return to_string(child) + " is not a shard or worker of this job";
  if (node >= p.nodes() || released(node))
    return name_of(node) + " is not a node of this job (any more)";
  if (!p.eligible(node))
    return name_of(node) + " takes no children now (" + (p.draining(node) ? "draining" : "lost") + ")";
  if (child.is(actor_kind::worker) && p.worker_slots() > 0 && !p.client(node) && !p.client(*at) &&
      !p.takes(node, child))
    return to_string(child) + " cannot move to " + name_of(node) +
           ": it has no free worker slot (keel cluster --worker-slots " + std::to_string(p.worker_slots()) + ")";
  if (!p.takes(node, child) || p.client(*at))
    return to_string(child) + " cannot move " + (p.client(*at) ? "off " : "to ") +
           name_of(p.client(*at) ? *at : node) + ": " +
           (p.client(*at) ? describe_client(p, *at)
                          : std::string("it takes no ") +
                              (child.is(actor_kind::shard) ? "shards" : "workers of keel's own")) +
           " (a client process runs only its workers' loops, and they stay there)";
  if (*at == node)
    return to_string(child) + " runs on " + name_of(node) + " already";
  if (!p.alive(*at))
    return to_string(child) + "'s node " + name_of(*at) + " is lost: it restarts by the policy";
  queue_.push_back({child, node, "requested by an operator, to " + name_of(node)});
  return std::nullopt;
}

std::vector<std::pair<actor_id, uint32_t>> move_plan::queue_rebalance(const placement_policy& p) {
  auto plan = p.rebalance();
  for (auto& [child, to] : plan)
    queue_.push_back({child, to, "rebalance onto " + name_of(to)});
  return plan;
}

// Draining `node`: it takes nothing new, and its children are queued to
// move, shards first (the workers wait for them anyway), each to the least
// loaded node when its turn comes. A lost node's children restart elsewhere
// on their own (it is not eligible); it is let go after.
void move_plan::begin_drain(placement_policy& p, uint32_t node) {
  p.set_draining(node, true);
  auto children = p.alive(node) ? p.children_of(node) : std::vector<actor_id>{};
  std::stable_partition(children.begin(), children.end(), [](actor_id c) { return c.is(actor_kind::shard); });
  for (auto child : children)
    queue_.push_back({child, std::nullopt, "drain of " + name_of(node)});
}

drain_decision move_plan::drain(placement_policy& p, uint32_t node) {
  using outcome = drain_decision::outcome;
  if (node >= p.nodes() || released(node))
    return {outcome::refused, name_of(node) + " is not a node of this job (any more)"};
  if (p.draining(node) || drain_waits(node))
    return {outcome::refused, name_of(node) + " is draining already"};
  if (p.client(node))
    return {outcome::refused, name_of(node) + " is a client process (" + describe_client(p, node) +
                                "): its loops end when it does"};
  if (eligible_besides(p, node) == 0) {
    // Lost nodes may come back (or a node may join): the drain waits for
    // one, and the node serves on meanwhile. With none, it cannot be.
    bool may_come_back = false;
    for (uint32_t i = 0; i < p.nodes(); ++i)
      may_come_back = may_come_back || (i != node && !released(i) && !p.draining(i));
    if (!may_come_back)
      return {outcome::refused, "cannot drain " + name_of(node) + ": no other live node to move its children to"};
    waiting_drains_.insert(node);
    return {outcome::waiting, {}};
  }
  if (auto slots = p.worker_slots(); slots > 0 && p.alive(node)) {
    // Its workers need free slots elsewhere: else each would wait for one
    // and then leave the job (or fail it), for a drain.
    uint32_t workers = p.load(node).workers, free = 0;
    for (uint32_t i = 0; i < p.nodes(); ++i)
      if (i != node && p.eligible(i) && !p.client(i))
        free += slots - std::min(slots, p.load(i).workers);
    if (workers > free)
      return {outcome::refused, "cannot drain " + name_of(node) + ": it runs " + std::to_string(workers) +
                                  (workers == 1 ? " worker" : " workers") + " and the other live nodes have " +
                                  std::to_string(free) + " free worker slot" + (free == 1 ? "" : "s") +
                                  " (keel cluster --worker-slots " + std::to_string(slots) +
                                  "; add a node first)"};
  }
  begin_drain(p, node);
  return {outcome::begun, {}};
}

std::vector<uint32_t> move_plan::resume_drains(placement_policy& p) {
  std::vector<uint32_t> begun;
  for (auto it = waiting_drains_.begin(); it != waiting_drains_.end();) {
    if (eligible_besides(p, *it) > 0 && !released(*it)) {
      begin_drain(p, *it);
      begun.push_back(*it);
      it = waiting_drains_.erase(it);
    } else {
      ++it;
    }
  }
  return begun;
}

std::optional<pending_move> move_plan::take_next(const placement_policy& p) {
  while (!queue_.empty()) {
    auto m = std::move(queue_.front());
    queue_.pop_front();
    auto at = p.node_of(m.child);
    if (!at || !p.alive(*at))
      continue;  // gone with its node: its restart goes by the policy anyway
    if (m.to ? (*m.to == *at || !p.takes(*m.to, m.child)) : !p.draining(*at))
      continue;
    return m;
  }
  return std::nullopt;
}

// Drained nodes with nothing left on them and no move queued off them. A
// node drained while lost is let go once its children restarted elsewhere.
std::vector<uint32_t> move_plan::release_drained(placement_policy& p) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < p.nodes(); ++i)
    if (p.draining(i) && !released(i) && p.children_of(i).empty() &&
        std::none_of(queue_.begin(), queue_.end(), [&](const pending_move& m) {
          auto at = p.node_of(m.child);
          return at && *at == i;
        })) {
      p.set_alive(i, false);
      if (i >= released_.size())
        released_.resize(i + 1, false);
      released_[i] = true;
      out.push_back(i);
    }
  return out;
}

next_step move_plan::next(placement_policy& p) {
  next_step out;
  if (moving_)
    return out;
  out.move = take_next(p);
  if (!out.move && moved_since_balanced_ && !rebalanced_) {
    rebalanced_ = true;
    for (auto& [child, to] : p.rebalance())
      queue_.push_back({child, to, "balancing after the moves, onto " + name_of(to)});
    out.move = take_next(p);
  }
  if (out.move) {
    moving_ = out.move->child;
    moving_why_ = out.move->why;
    moving_started_ = false;
    settle_step_.reset();
    moved_since_balanced_ = true;
    if (out.move->to)
      pinned_[out.move->child] = *out.move->to;
    return out;
  }
  out.released = release_drained(p);
  if (moved_since_balanced_)
    out.balanced = describe_loads(p);
  moved_since_balanced_ = false;
  rebalanced_ = false;
  return out;
}

bool move_plan::stopped(actor_id child, uint64_t settle_at) {
  if (moving_ != child)
    return false;
  settle_step_ = settle_at;
  return settle();
}

void move_plan::not_stopped(actor_id child) {
  if (moving_ == child)
    moving_.reset();
  pinned_.erase(child);
}

std::optional<std::string> move_plan::started(actor_id child) {
  pinned_.erase(child);
  if (moving_ != child || moving_started_)
    return std::nullopt;
  moving_started_ = true;
  return moving_why_;
}

void move_plan::committed(uint64_t step) {
  committed_step_ = std::max(committed_step_, step);
}

bool move_plan::settle() {
  if (!moving_ || !moving_started_ || !settle_step_)
    return false;
  if (*settle_step_ != 0 && committed_step_ < *settle_step_)
    return false;
  moving_.reset();
  return true;
}

std::optional<uint32_t> move_plan::pin_of(actor_id child) const {
  auto it = pinned_.find(child);
  return it == pinned_.end() ? std::nullopt : std::optional<uint32_t>(it->second);
}

}  // namespace keel
