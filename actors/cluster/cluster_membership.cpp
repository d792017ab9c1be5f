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

// Asks the job to stop the child of move `m`; its restart ends the move.
void stop_for_move(caf::event_based_actor* self, const state_ptr& st, const pending_move& m, const caf::actor& job) {
  auto name = to_string(m.child);
  self->request(job, caf::infinite, move_atom::value, name, m.why)
    .then(
      [self, st, m](uint64_t settle_at) {
        bool next = false;
        {
          std::lock_guard<std::mutex> guard(st->mtx);
          next = st->plan.stopped(m.child, settle_at);
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
          st->plan.not_stopped(m.child);
          node = st->policy.node_of(m.child).value_or(0);
        }
        tell_job(st, event_kind::membership, node,
                 "move of " + name + " (" + m.why + ") not carried out: " + describe(err));
        start_next_move(self, st);
      });
}

void start_next_move(caf::event_based_actor* self, const state_ptr& st) {
  next_step step;
  std::optional<pre_copy> precopy;
  caf::actor job;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    if (st->plan.moving() || !st->job)
      return;
    step = st->plan.next(st->policy);
    if (step.move)
      precopy = pre_copy_of(*st, *step.move);
    job = st->job;
  }
  for (auto i : step.released)
    tell_job(st, event_kind::released, i, "drained: nothing of the job runs there any more");
  if (!step.balanced.empty() && job)
    caf::anon_send(job, make_job_event(event_kind::membership, "cluster", "moves done: " + step.balanced));
  if (!step.move)
    return;
  if (!precopy)
    return stop_for_move(self, st, *step.move, job);
  start_pre_copy(self, st, *step.move, std::move(*precopy));
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

std::optional<std::string> move_started(const state_ptr& st, actor_id child) {
  std::optional<std::string> why;
  caf::actor watcher;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    why = st->plan.started(child);
    if (why && st->plan.settle())
      watcher = st->watcher;
  }
  if (watcher)
    caf::anon_send(watcher, next_move_atom::value);
  return why;
}

void resume_pending_drains(const state_ptr& st) {
  caf::actor watcher;
  std::vector<uint32_t> begun;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    begun = st->plan.resume_drains(st->policy);
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
    auto d = state_->plan.drain(state_->policy, node);
    if (d.what == drain_decision::outcome::refused)
      return make_error(errc::invalid_argument, d.why);
    if (d.what == drain_decision::outcome::waiting)
      return {};
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
          !st->plan.released(i))
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
    st->plan.add_node();
    st->policy.set_client(index, h->client_workers);
    if (st->policy.client(index))
      role = std::string("a client process (") + describe_client(st->policy, index) +
             (st->policy.client_loops() ? ")" : ", but this job's workers run their model's own loop)");
    plan = st->plan.queue_rebalance(st->policy);
    for (auto& [child, to] : plan)
      moves += (moves.empty() ? " (" : ", ") + to_string(child) + " to " + st->node_name(to);
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
      st->plan.add_node(true);
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
