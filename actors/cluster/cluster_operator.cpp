// What an operator asks of a running cluster's placement (keel admin,
// actors/cluster/cluster_admin.hpp): a move, a change of the job's workers,
// an event in the timeline, and where everything runs.
#include <chrono>

#include <caf/all.hpp>

#include "actors/cluster/cluster_placement_state.hpp"
#include "actors/core/atoms.hpp"
#include "actors/metrics/metrics.hpp"
#include "messages/errors.hpp"

namespace keel {

caf::error cluster_placement::move(actor_id child, uint32_t node) {
  caf::actor watcher;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    auto& p = state_->policy;
    auto at = p.node_of(child);
    if (!at || !(child.is(actor_kind::shard) || child.is(actor_kind::worker)))
      return make_error(errc::invalid_argument, to_string(child) + " is not a shard or worker of this job");
    if (node >= p.nodes() || state_->released[node])
      return make_error(errc::invalid_argument, state_->node_name(node) + " is not a node of this job (any more)");
    if (!p.eligible(node))
      return make_error(errc::invalid_argument, state_->node_name(node) + " takes no children now (" +
                                                  (p.draining(node) ? "draining" : "lost") + ")");
    if (child.is(actor_kind::worker) && p.worker_slots() > 0 && !p.client(node) && !p.client(*at) &&
        !p.takes(node, child))
      return make_error(errc::invalid_argument, to_string(child) + " cannot move to " + state_->node_name(node) +
                                                  ": it has no free worker slot (keel cluster --worker-slots " +
                                                  std::to_string(p.worker_slots()) + ")");
    if (!p.takes(node, child) || p.client(*at))
      return make_error(errc::invalid_argument,
                        to_string(child) + " cannot move " + (p.client(*at) ? "off " : "to ") +
                          state_->node_name(p.client(*at) ? *at : node) + ": " +
                          (p.client(*at) ? describe_client(p, *at) : std::string("it takes no ") +
                                                                       (child.is(actor_kind::shard) ? "shards"
                                                                                                    : "workers of keel's own")) +
                          " (a client process runs only its workers' loops, and they stay there)");
    if (*at == node)
      return make_error(errc::invalid_argument, to_string(child) + " runs on " + state_->node_name(node) + " already");
    if (!p.alive(*at))
      return make_error(errc::invalid_argument, to_string(child) + "'s node " + state_->node_name(*at) +
                                                  " is lost: it restarts by the policy");
    state_->moves.push_back({child, node, "requested by an operator, to " + state_->node_name(node)});
    watcher = state_->watcher;
  }
  if (watcher)
    caf::anon_send(watcher, next_move_atom::value);
  return {};
}

caf::expected<uint64_t> cluster_placement::change_workers(const std::string& item) {
  return ask_job_workers(state_, caf::make_message(workers_atom::value, item), item, std::chrono::minutes(2));
}

caf::expected<uint64_t> ask_job_workers(const state_ptr& state_, caf::message request, const std::string& what,
                                        std::chrono::milliseconds timeout) {
  // As add_node: the discoverer asks the job, and leaves the answer in the
  // state (a request from a thread of no actor kept the system from
  // shutting down).
  caf::actor discoverer;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    if (state_->detached || !state_->discoverer)
      return make_error(errc::shutting_down, "the job is not running");
    discoverer = state_->discoverer;
    ticket = ++state_->last_add_ticket;
  }
  caf::anon_send(discoverer, ask_workers_atom::value, ticket, std::move(request));
  std::unique_lock<std::mutex> lock(state_->mtx);
  if (!state_->changed.wait_for(lock, timeout,
                                [&] { return state_->workers_changed.count(ticket) > 0 || state_->detached; }))
    return make_error(errc::timeout, "the job did not answer the change of workers '" + what + "' within " +
                                       std::to_string(timeout.count()) + " ms");
  auto it = state_->workers_changed.find(ticket);
  if (it == state_->workers_changed.end())
    return make_error(errc::shutting_down, "the job ended before it changed its workers");
  auto out = std::move(it->second);
  state_->workers_changed.erase(it);
  return out;
}

void cluster_placement::note(uint32_t node, std::string detail) {
  tell_job(state_, event_kind::membership, node, std::move(detail));
}

std::string cluster_placement::status_json() const {
  std::lock_guard<std::mutex> guard(state_->mtx);
  const auto& st = *state_;
  const auto& p = st.policy;
  std::string out = "{\"nodes\": [";
  for (uint32_t i = 0; i < p.nodes(); ++i) {
    auto load = p.load(i);
    std::string state = st.released[i]            ? "released"
                        : p.draining(i)           ? "draining"
                        : !p.alive(i)             ? "lost"
                        : st.pending_drains.count(i) ? "waiting to drain"
                                                  : "live";
    std::string address;
    if (i < st.cfg.nodes.size())
      address = st.cfg.nodes[i].host + ":" + std::to_string(st.cfg.nodes[i].port);
    std::string children;
    for (auto child : st.released[i] ? std::vector<actor_id>{} : p.children_of(i))
      children += (children.empty() ? "" : ", ") + json_string(to_string(child));
    out += std::string(i ? ",\n  " : "\n  ") + "{\"node\": " + json_string(st.node_name(i)) +
           ", \"address\": " + json_string(address) + ", \"state\": " + json_string(state) +
           ", \"client_of\": [" + client_list(p, i) + "]" +
           ", \"shards\": " + std::to_string(load.shards) + ", \"shard_bytes\": " +
           std::to_string(load.shard_bytes) + ", \"workers\": " + std::to_string(load.workers) +
           ", \"children\": [" + children + "]}";
  }
  out += "],\n \"moving\": " + (st.moving ? json_string(to_string(*st.moving)) : std::string("null")) +
         ", \"queued_moves\": " + std::to_string(st.moves.size()) +
         ", \"committed_step\": " + std::to_string(st.committed_step) + "}\n";
  return out;
}

}  // namespace keel
