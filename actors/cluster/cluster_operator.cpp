// What an operator asks of a running cluster's placement (keel admin,
// actors/cluster/cluster_admin.hpp): a move, a change of the job's workers,
// an event in the timeline, and where everything runs.
#include <chrono>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/cluster/cluster_placement_state.hpp"
#include "actors/core/atoms.hpp"
#include "messages/errors.hpp"

namespace keel {

caf::error cluster_placement::move(actor_id child, uint32_t node) {
  caf::actor watcher;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    if (auto why = state_->plan.request_move(state_->policy, child, node))
      return make_error(errc::invalid_argument, *why);
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
  using json = nlohmann::ordered_json;
  std::lock_guard<std::mutex> guard(state_->mtx);
  const auto& st = *state_;
  const auto& p = st.policy;
  json nodes = json::array();
  for (uint32_t i = 0; i < p.nodes(); ++i) {
    auto load = p.load(i);
    std::string state = st.plan.released(i)       ? "released"
                        : p.draining(i)           ? "draining"
                        : !p.alive(i)             ? "lost"
                        : st.plan.drain_waits(i)  ? "waiting to drain"
                                                  : "live";
    std::string address;
    if (i < st.cfg.nodes.size())
      address = st.cfg.nodes[i].host + ":" + std::to_string(st.cfg.nodes[i].port);
    json children = json::array();
    for (auto child : st.plan.released(i) ? std::vector<actor_id>{} : p.children_of(i))
      children.push_back(to_string(child));
    nodes.push_back({{"node", st.node_name(i)},
                     {"address", address},
                     {"state", state},
                     {"client_of", p.served(i)},
                     {"shards", load.shards},
                     {"shard_bytes", load.shard_bytes},
                     {"workers", load.workers},
                     {"children", children}});
  }
  json status = {{"nodes", nodes},
                 {"moving", st.plan.moving() ? json(to_string(*st.plan.moving())) : json(nullptr)},
                 {"queued_moves", st.plan.queued()},
                 {"committed_step", st.plan.committed_step()}};
  return status.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace keel
