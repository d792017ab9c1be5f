// A running cluster's membership changes: nodes drained and nodes added,
// carried out as moves, one child at a time. A move asks the job to stop
// the child (move_atom, errc::moved); its supervisor restarts it from its
// last checkpoint, as after any crash, and the placement's start puts it
// on the move's target (or, for a drain, wherever the policy says); the
// workers replay what the restarted shard lacks. Nothing acknowledged is
// lost and BSP stays bit-identical, by the same machinery as a kill.
// A shard's move is live (a pre-copy, then a short cutover): before it is
// stopped, the node it goes to restores its newest committed chain while it
// still serves (node_prepare_atom, actors/ps/shard_standby.hpp); the
// restart there takes that state, with any delta committed meanwhile
// applied, and the workers' replay brings what came after.
#include <algorithm>
#include <chrono>

#include <caf/all.hpp>

#include "actors/cluster/cluster_placement_state.hpp"
#include "actors/core/atoms.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

// The next move that still applies, taken off the queue (locked): its child
// still runs on a draining node (a drain) or elsewhere than its target (a
// rebalance), and the target still takes children.
std::optional<pending_move> take_next(cluster_placement::state& st) {
  while (!st.moves.empty()) {
    auto m = std::move(st.moves.front());
    st.moves.pop_front();
    auto at = st.policy.node_of(m.child);
    if (!at || !st.policy.alive(*at))
      continue;  // gone with its node: its restart goes by the policy anyway
    if (m.to ? (*m.to == *at || !st.policy.takes(*m.to, m.child)) : !st.policy.draining(*at))
      continue;
    return m;
  }
  return std::nullopt;
}

// Every node that takes children, with its load (locked): "node:2 3 shards
// (4.4 kB) and 3 workers, node:3 ...".
std::string describe_loads(const cluster_placement::state& st) {
  std::string out;
  for (uint32_t i = 0; i < st.policy.nodes(); ++i)
    if (st.policy.eligible(i))
      out += (out.empty() ? "" : ", ") + st.node_name(i) + " " + describe_load(st.policy.load(i));
  return out;
}

// Drained nodes with nothing left on them are let go (locked): they take
// nothing again and are not reconnected. Returns their indices. A node
// drained while lost is let go once its children have restarted elsewhere.
std::vector<uint32_t> release_drained(cluster_placement::state& st) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < st.policy.nodes(); ++i)
    if (st.policy.draining(i) && !st.released[i] && st.policy.children_of(i).empty() &&
        std::none_of(st.moves.begin(), st.moves.end(), [&](const pending_move& m) {
          auto at = st.policy.node_of(m.child);
          return at && *at == i;
        })) {
      st.policy.set_alive(i, false);
      st.released[i] = true;
      out.push_back(i);
    }
  return out;
}

}  // namespace

// Asks the job to stop the child of move `m`; its restart ends the move.
void stop_for_move(caf::event_based_actor* self, const state_ptr& st, const pending_move& m, const caf::actor& job) {
  auto name = to_string(m.child);
  self->request(job, caf::infinite, move_atom::value, name, m.why)
    .then(
      [self, st, m](uint64_t settle_at) {
        bool next = false;
        {
          std::lock_guard<std::mutex> guard(st->mtx);
          if (st->moving == m.child) {
            st->settle_step = settle_at;
            next = settle_move(*st);
          }
        }
        if (next)
          start_next_move(self, st);
      },
      [self, st, m, name](caf::error& err) {
        // Not stopped (the job ended, or the child is not running):
        // the move is dropped and the next one starts.
        uint32_t node = 0;
        {
          std::lock_guard<std::mutex> guard(st->mtx);
          if (st->moving == m.child)
            st->moving.reset();
          st->pinned.erase(m.child);
          node = st->policy.node_of(m.child).value_or(0);
        }
        tell_job(st, event_kind::membership, node,
                 "move of " + name + " (" + m.why + ") not carried out: " + describe(err));
        start_next_move(self, st);
      });
}

void start_next_move(caf::event_based_actor* self, const state_ptr& st) {
  std::optional<pending_move> m;
  std::optional<pre_copy> precopy;
  std::vector<uint32_t> released;
  std::string balanced;  // the loads once the moves are done
  caf::actor job;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    if (st->moving || !st->job)
      return;
    m = take_next(*st);
    if (!m && st->moved_since_balanced && !st->rebalanced) {
      // The queue is done: once more, the moves that balance the cluster
      // now. A join's plan was made for the loads then, and a drain or a
      // restart that overlapped it may have moved children meanwhile.
      st->rebalanced = true;
      for (auto& [child, to] : st->policy.rebalance())
        st->moves.push_back({child, to, "balancing after the moves, onto " + st->node_name(to)});
      m = take_next(*st);
    }
    if (m) {
      st->moving = m->child;
      st->moving_why = m->why;
      st->moving_started = false;
      st->settle_step.reset();
      st->moved_since_balanced = true;
      if (m->to)
        st->pinned[m->child] = *m->to;
      precopy = pre_copy_of(*st, *m);
    } else {
      released = release_drained(*st);
      if (st->moved_since_balanced)
        balanced = describe_loads(*st);
      st->moved_since_balanced = false;
      st->rebalanced = false;
    }
    job = st->job;
  }
  for (auto i : released)
    tell_job(st, event_kind::released, i, "drained: nothing of the job runs there any more");
  if (!balanced.empty() && job)
    caf::anon_send(job, make_job_event(event_kind::membership, "cluster", "moves done: " + balanced));
  if (!m)
    return;
  if (!precopy)
    return stop_for_move(self, st, *m, job);
  start_pre_copy(self, st, *m, std::move(*precopy));
}

void poke_if_left_drained(const state_ptr& st, std::optional<uint32_t> node) {
  caf::actor watcher;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    if (!node || !st->policy.draining(*node))
      return;
    watcher = st->watcher;
  }
  if (watcher)
    caf::anon_send(watcher, next_move_atom::value);
}

bool settle_move(cluster_placement::state& st) {
  if (!st.moving || !st.moving_started || !st.settle_step)
    return false;
  if (*st.settle_step != 0 && st.committed_step < *st.settle_step)
    return false;
  st.moving.reset();
  return true;
}

std::optional<std::string> move_started(const state_ptr& st, actor_id child) {
  std::optional<std::string> why;
  caf::actor watcher;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    if (st->moving != child || st->moving_started)
      return why;
    st->moving_started = true;
    why = st->moving_why;
    if (settle_move(*st))
      watcher = st->watcher;
  }
  if (watcher)
    caf::anon_send(watcher, next_move_atom::value);
  return why;
}

namespace {

// Starts draining `node` (locked): it takes nothing new, and its children
// are queued to move, shards first (the workers wait for them anyway), each
// to the least loaded node when its turn comes. A lost node's children
// restart elsewhere on their own (it is not eligible); it is let go after.
void begin_drain(cluster_placement::state& st, uint32_t node) {
  auto& p = st.policy;
  p.set_draining(node, true);
  auto children = p.alive(node) ? p.children_of(node) : std::vector<actor_id>{};
  std::stable_partition(children.begin(), children.end(), [](actor_id c) { return c.is(actor_kind::shard); });
  for (auto child : children)
    st.moves.push_back({child, std::nullopt, "drain of " + st.node_name(node)});
}

uint32_t eligible_besides(const cluster_placement::state& st, uint32_t node) {
  uint32_t others = 0;
  for (uint32_t i = 0; i < st.policy.nodes(); ++i)
    others += i != node && st.policy.eligible(i) && !st.policy.client(i);
  return others;
}

}  // namespace

void resume_pending_drains(const state_ptr& st) {
  caf::actor watcher;
  std::vector<uint32_t> begun;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    for (auto it = st->pending_drains.begin(); it != st->pending_drains.end();) {
      if (eligible_besides(*st, *it) > 0 && !st->released[*it]) {
        begin_drain(*st, *it);
        begun.push_back(*it);
        it = st->pending_drains.erase(it);
      } else {
        ++it;
      }
    }
    watcher = st->watcher;
  }
  for (auto node : begun)
    tell_job(st, event_kind::membership, node, "drain begins: a node to move its children to is live");
  if (watcher && !begun.empty())
    caf::anon_send(watcher, next_move_atom::value);
}

caf::error cluster_placement::drain(uint32_t node) {
  caf::actor watcher;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    auto& p = state_->policy;
    if (node >= p.nodes() || state_->released[node])
      return make_error(errc::invalid_argument, state_->node_name(node) + " is not a node of this job (any more)");
    if (p.draining(node) || state_->pending_drains.count(node))
      return make_error(errc::invalid_argument, state_->node_name(node) + " is draining already");
    if (p.client(node))
      return make_error(errc::invalid_argument, state_->node_name(node) + " is a client process (" +
                                                  describe_client(p, node) + "): its loops end when it does");
    if (eligible_besides(*state_, node) == 0) {
      // Lost nodes may come back (or a node may join): the drain waits for
      // one, and the node serves on meanwhile. With none, it cannot be.
      bool may_come_back = false;
      for (uint32_t i = 0; i < p.nodes(); ++i)
        may_come_back = may_come_back || (i != node && !state_->released[i] && !p.draining(i));
      if (!may_come_back)
        return make_error(errc::invalid_argument,
                          "cannot drain " + state_->node_name(node) + ": no other live node to move its children to");
      state_->pending_drains.insert(node);
      return {};
    }
    if (auto slots = p.worker_slots(); slots > 0 && p.alive(node)) {
      // Its workers need free slots elsewhere: else each would wait for one
      // and then leave the job (or fail it), for a drain.
      uint32_t workers = p.load(node).workers, free = 0;
      for (uint32_t i = 0; i < p.nodes(); ++i)
        if (i != node && p.eligible(i) && !p.client(i))
          free += slots - std::min(slots, p.load(i).workers);
      if (workers > free)
        return make_error(errc::invalid_argument,
                          "cannot drain " + state_->node_name(node) + ": it runs " + std::to_string(workers) +
                            (workers == 1 ? " worker" : " workers") + " and the other live nodes have " +
                            std::to_string(free) + " free worker slot" + (free == 1 ? "" : "s") +
                            " (keel cluster --worker-slots " + std::to_string(slots) + "; add a node first)");
    }
    begin_drain(*state_, node);
    watcher = state_->watcher;
  }
  if (watcher)
    caf::anon_send(watcher, next_move_atom::value);
  return {};
}

caf::error add_node_to(const state_ptr& st, const node_address& address) {
  caf::actor_system* sys = nullptr;
  caf::actor watcher;
  uint32_t index = 0;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    watcher = st->watcher;
    sys = st->sys;
    index = st->policy.nodes();
  }
  if (!watcher || !sys)
    return make_error(errc::invalid_argument, "the placement is not attached to a job");
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    for (uint32_t i = 0; i < st->cfg.nodes.size(); ++i)
      if (st->cfg.nodes[i].host == address.host && st->cfg.nodes[i].port == address.port &&
          (i >= st->released.size() || !st->released[i]))
        return make_error(errc::invalid_argument, address.host + ":" + std::to_string(address.port) + " is " +
                                                    st->node_name(i) + " of this job already");
  }
  auto name = st->node_name(index);
  auto h = connect_node(*sys, address.host, address.port, st->cfg.secret, st->cfg.spawn_timeout, {},
                        tls_peer{st->cfg.tls, address.identity()});
  if (!h)
    return make_error(errc::not_found, name + " at " + address.host + ":" + std::to_string(address.port) +
                                         ": " + describe(h.error()));
  caf::actor replica;
  if (st->cfg.peer_copy)
    if (auto r = replica_of(*h, st->cfg.spawn_timeout))
      replica = *r;
  std::vector<std::pair<actor_id, uint32_t>> plan;
  std::string role;   // for a client process
  std::string moves;  // " (shard:2 to node:3, ...)"
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    index = st->policy.add_node();  // the same index unless two joined at once
    name = st->node_name(index);
    st->cfg.nodes.push_back(address);
    st->handles.push_back(*h);
    st->replicas.push_back(replica);
    st->released.push_back(false);
    st->policy.set_client(index, h->client_workers);
    if (st->policy.client(index))
      role = std::string("a client process (") + describe_client(st->policy, index) +
             (st->policy.client_loops() ? ")" : ", but this job's workers run their model's own loop)");
    plan = st->policy.rebalance();
    for (auto& [child, to] : plan) {
      st->moves.push_back({child, to, "rebalance onto " + st->node_name(to)});
      moves += (moves.empty() ? " (" : ", ") + to_string(child) + " to " + st->node_name(to);
    }
  }
  if (!moves.empty())
    moves += ")";
  st->changed.notify_all();  // a start or the job's beginning may wait for it
  caf::anon_send(watcher, watch_node_atom::value, h->agent);
  tell_routes(*sys, st);
  resume_pending_drains(st);
  tell_job(st, event_kind::node_up, index,
           "joined at " + address.host + ":" + std::to_string(address.port) + " (node " + h->node + (role.empty() ? "" : ", ") +
             role + "); " + std::to_string(plan.size()) + (plan.size() == 1 ? " move" : " moves") + " to balance" + moves);
  caf::anon_send(watcher, next_move_atom::value);
  return {};
}

void discover_joined(const state_ptr& st) {
  node_handle member;
  std::vector<node_address> known;
  std::vector<std::string> ids;
  {
    // Members take turns: a process joins whichever member it was told.
    std::lock_guard<std::mutex> guard(st->mtx);
    auto n = static_cast<uint32_t>(st->handles.size());
    for (uint32_t k = 0; k < n && !member.agent; ++k) {
      auto i = (st->discover_next + k) % n;
      if (st->policy.alive(i)) {
        member = st->handles[i];
        st->discover_next = i + 1;
      }
    }
    known = st->cfg.nodes;
    for (auto& h : st->handles) ids.push_back(h.node);
  }
  if (!member.agent)
    return;
  auto listed = list_nodes(member, st->cfg.settings.connection_timeout);
  if (!listed)
    return;  // asked again at the next round
  for (auto& n : *listed) {
    bool is_known = n.port == 0 || std::find(ids.begin(), ids.end(), n.node) != ids.end() ||
                    std::any_of(known.begin(), known.end(),
                                [&](const node_address& a) { return a.host == n.host && a.port == n.port; });
    if (is_known)
      continue;
    node_address address{n.host, n.port, {}};
    if (auto err = add_node_to(st, address)) {
      tell_job(st, event_kind::membership, 0,
               "a node that joined " + member.host + ":" + std::to_string(member.port) + " (" + n.host + ":" +
                 std::to_string(n.port) + ") could not be added: " + describe(err));
      std::lock_guard<std::mutex> guard(st->mtx);
      st->cfg.nodes.push_back(address);  // not asked again: the event said why
      st->handles.push_back(node_handle{});
      st->replicas.emplace_back();
      st->released.push_back(true);
      st->policy.set_alive(st->policy.add_node(), false);
    }
  }
}

caf::error cluster_placement::add_node(const node_address& address) {
  caf::actor discoverer;
  caf::actor_system* sys = nullptr;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    if (state_->detached)
      return make_error(errc::invalid_argument, "the job has ended: no node joins it any more");
    if (!state_->watcher) {  // not attached: a node to start on
      cfg_.nodes.push_back(address);
      state_->cfg.nodes.push_back(address);
      return {};
    }
    discoverer = state_->discoverer;
    sys = state_->sys;
  }
  if (!discoverer || !sys)
    return make_error(errc::invalid_argument, "the placement is not attached to a job");
  // The discoverer adds it, as it adds nodes that joined a member, and
  // leaves the outcome in the state. Called from a thread of no actor
  // (keel cluster's admin endpoint), add_node_to, or a scoped actor asking
  // the discoverer, left the actor system unable to shut down at the job's
  // end (seen: the coordinator hung in ~actor_system with no CAF thread
  // left); an anonymous send, as drains use, does not.
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    ticket = ++state_->last_add_ticket;
  }
  caf::anon_send(discoverer, add_node_atom::value, ticket, address.host, address.port, address.tls_name);
  std::unique_lock<std::mutex> lock(state_->mtx);
  auto deadline = std::chrono::steady_clock::now() + 3 * cfg_.spawn_timeout;
  if (!state_->changed.wait_until(lock, deadline,
                                  [&] { return state_->added.count(ticket) > 0 || state_->detached; }))
    return make_error(errc::timeout, "adding the node at " + address.host + ":" + std::to_string(address.port) +
                                       " took longer than " + std::to_string(3 * cfg_.spawn_timeout.count()) + " ms");
  if (!state_->added.count(ticket))
    return make_error(errc::invalid_argument, "the job ended before the node at " + address.host + ":" +
                                                std::to_string(address.port) + " joined it");
  auto result = std::move(state_->added[ticket]);
  state_->added.erase(ticket);
  return result;
}

uint32_t cluster_placement::nodes() const {
  std::lock_guard<std::mutex> guard(state_->mtx);
  return std::max<uint32_t>(state_->policy.nodes(), static_cast<uint32_t>(state_->cfg.nodes.size()));
}

}  // namespace keel
