#include "actors/cluster/cluster_placement.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/cluster_placement_state.hpp"
#include "actors/cluster/placement_policy.hpp"
#include "actors/core/atoms.hpp"
#include "actors/core/job_event.hpp"
#include "actors/core/update_rules.hpp"
#include "messages/errors.hpp"

namespace keel {

void tell_job(const state_ptr& st, event_kind kind, uint32_t node, std::string detail,
              std::string children) {
  auto e = make_job_event(kind, st->node_name(node), std::move(detail));
  e.peer = std::move(children);
  if (st->job)
    caf::anon_send(st->job, std::move(e));
}

// Every live node's data plane address.
std::vector<data_route> routes_of(const state_ptr& st) {
  std::vector<data_route> out;
  std::lock_guard<std::mutex> guard(st->mtx);
  for (uint32_t i = 0; i < st->handles.size(); ++i)
    if (st->policy.alive(i) && st->handles[i].data_port != 0)
      out.push_back(data_route{st->handles[i].node, st->handles[i].host, st->handles[i].data_port,
                               st->handles[i].tls_name});
  return out;
}

// Tells every live node where the others' data planes are now, so workers
// started before a node came back reach its shards on it too.
void tell_routes(caf::actor_system& sys, const state_ptr& st) {
  auto routes = routes_of(st);
  std::vector<caf::actor> agents;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    for (uint32_t i = 0; i < st->handles.size(); ++i)
      if (st->policy.alive(i))
        agents.push_back(st->handles[i].agent);
  }
  // Not from the (detached) watcher itself: a detached actor whose handle
  // went to another node stays in CAF 0.17's registry and its thread blocks
  // the actor system's shutdown for good (upstream #1110, CAF017.md; seen
  // here as a coordinator hanging at exit). A scoped actor, as connect_node
  // uses, does not. A node that does not take them keeps using CAF's path.
  caf::scoped_actor sender{sys};
  for (auto& a : agents)
    sender->send(a, node_routes_atom::value, routes);
}

namespace {

// A child's placement, for the timeline (every start, so that where each
// child runs can be read from the events): where it went, from where when
// it restarted, the load that made its new node the choice (before it
// came), what a shard weighs, and why a move put it there.
void tell_placed(const state_ptr& st, actor_id child, uint32_t node, std::optional<uint32_t> was,
                 const node_load& load, const std::optional<std::string>& moved) {
  std::string weighs;
  if (child.is(actor_kind::shard)) {
    std::lock_guard<std::mutex> guard(st->mtx);
    weighs = "; it weighs " + readable_bytes(st->policy.weight_of(child));
  }
  auto e = make_job_event(event_kind::placed, to_string(child),
                          "on " + st->node_name(node) + (was ? " (was " + st->node_name(*was) + ")" : "") +
                            ", which held " + describe_load(load) + weighs + (moved ? "; moved: " + *moved : ""));
  e.peer = st->node_name(node);
  e.count = moved ? 1 : 0;
  if (st->job)
    caf::anon_send(st->job, std::move(e));
}

}  // namespace

cluster_placement::cluster_placement(cluster_placement_config cfg)
    : cfg_(std::move(cfg)), state_(std::make_shared<state>()) {
  state_->cfg = cfg_;
}

cluster_placement::~cluster_placement() {
  detach();
}

void cluster_placement::detach() {
  caf::actor watcher, discoverer, pre_copier;
  std::vector<node_handle> handles;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    std::swap(watcher, state_->watcher);
    std::swap(discoverer, state_->discoverer);
    std::swap(handles, state_->handles);  // proxies of the system going away
    state_->replicas.assign(state_->replicas.size(), caf::actor{});
    for (uint32_t i = 0; i < state_->policy.nodes(); ++i)
      state_->policy.set_alive(i, false);
    state_->job = caf::actor{};
    state_->shard_requests.clear();
    state_->newest_refs.clear();
    pre_copier = caf::actor_cast<caf::actor>(state_->pre_copier);
    state_->pre_copier = caf::actor_addr{};
    state_->detached = true;
  }
  state_->changed.notify_all();  // an add_node waiting on the discoverer gives up
  if (watcher)
    caf::anon_send_exit(watcher, caf::exit_reason::kill);
  if (discoverer)
    caf::anon_send_exit(discoverer, caf::exit_reason::kill);
  if (pre_copier)  // waiting on a node that will not answer: the system's end would wait for it
    caf::anon_send_exit(pre_copier, caf::exit_reason::kill);
}

void cluster_placement::configure(caf::actor_system_config& cfg) {
  configure_cluster_system(cfg, cfg_.settings);
}

caf::error cluster_placement::attach(caf::actor_system& sys, const caf::actor& job) {
  if (cfg_.nodes.empty())
    return make_error(errc::invalid_argument, "a cluster placement needs at least one node");
  std::vector<node_handle> handles;
  for (uint32_t i = 0; i < cfg_.nodes.size(); ++i) {
    auto& a = cfg_.nodes[i];
    auto h = connect_node(sys, a.host, a.port, cfg_.secret, cfg_.spawn_timeout, {}, tls_peer{cfg_.tls, a.identity()});
    if (!h)
      return make_error(errc::not_found, "node:" + std::to_string(i) + " at " + a.host + ":" +
                                           std::to_string(a.port) + ": " + describe(h.error()));
    handles.push_back(*h);
  }
  // A node without a replica (an older keel) gets no copies.
  std::vector<caf::actor> replicas(handles.size());
  if (cfg_.peer_copy)
    for (size_t i = 0; i < handles.size(); ++i)
      if (auto r = replica_of(handles[i], cfg_.spawn_timeout))
        replicas[i] = *r;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    state_->handles = std::move(handles);
    state_->replicas = std::move(replicas);
    state_->policy = placement_policy(static_cast<uint32_t>(state_->handles.size()));
    state_->policy.set_client_loops(cfg_.client_workers > 0);
    state_->policy.set_worker_slots(cfg_.worker_slots);
    for (uint32_t i = 0; i < state_->handles.size(); ++i)
      state_->policy.set_client(i, state_->handles[i].client_workers);
    state_->plan = move_plan{};
    for (size_t i = 0; i < state_->handles.size(); ++i)
      state_->plan.add_node();
    state_->job = job;
    state_->sys = &sys;
    state_->detached = false;
  }
  state_->watcher = sys.spawn<caf::detached>(node_watcher, state_);
  // Apart from the watcher: asking a stopped member blocks for the timeout.
  auto discoverer = sys.spawn<caf::detached>([st = state_](caf::event_based_actor* self) -> caf::behavior {
    self->delayed_send(self, st->cfg.discover_every, discover_atom::value);
    return {
      [self, st](discover_atom) {
        discover_joined(st);
        self->delayed_send(self, st->cfg.discover_every, discover_atom::value);
      },
      [self, st](ask_workers_atom, uint64_t ticket, caf::message& request) {
        caf::actor job;
        {
          std::lock_guard<std::mutex> guard(st->mtx);
          job = st->job;
        }
        auto answer = [st, ticket](caf::expected<uint64_t> at) {
          {
            std::lock_guard<std::mutex> guard(st->mtx);
            st->workers_changed.emplace(ticket, std::move(at));
          }
          st->changed.notify_all();
        };
        if (!job)
          return answer(make_error(errc::shutting_down, "the job has ended"));
        self->request(job, std::chrono::minutes(1), std::move(request))
          .then([answer](uint64_t at) { answer(at); }, [answer](caf::error& err) { answer(std::move(err)); });
      },
      [st](add_node_atom, uint64_t ticket, const std::string& host, uint16_t port, const std::string& tls_name) {
        auto err = add_node_to(st, node_address{host, port, tls_name});
        {
          std::lock_guard<std::mutex> guard(st->mtx);
          st->added[ticket] = std::move(err);
        }
        st->changed.notify_all();
      },
    };
  });
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    state_->discoverer = discoverer;
  }
  return await_clients();
}

caf::error cluster_placement::await_clients() {
  if (cfg_.client_workers == 0)
    return {};
  // The discoverer adds each client that joins a member (add_node_to).
  auto missing = [&] {
    std::vector<uint32_t> out;
    for (uint32_t w = 0; w < cfg_.client_workers; ++w)
      if (state_->policy.candidates(actor_id::worker(w), 1, 0).empty())
        out.push_back(w);
    return out;
  };
  std::unique_lock<std::mutex> lock(state_->mtx);
  if (state_->changed.wait_for(lock, cfg_.client_wait, [&] { return missing().empty() || state_->detached; }) &&
      !state_->detached)
    return {};
  std::string names;
  for (auto w : missing())
    names += (names.empty() ? "" : ", ") + to_string(actor_id::worker(w));
  return make_error(errc::not_found,
                    "no client process running the loop of " + names + " joined a node of the job within " +
                      std::to_string(cfg_.client_wait.count()) +
                      " ms (keel::cluster_client or keel.connect, joined to a node this job uses)");
}

caf::expected<caf::actor> cluster_placement::start(uint32_t preferred, spawn_request req) {
  const bool copies = cfg_.peer_copy && req.id.kind == actor_kind::shard;
  auto name = req.id;
  // With no node to take it (every one lost, one restarting), waits up to
  // spawn_timeout for the watcher to bring one back, and only while none
  // has taken children for node_wait.
  auto deadline = std::chrono::steady_clock::now() + cfg_.spawn_timeout;
  std::string tried;
  for (;;) {
    bool only_gone = true;  // every node tried was gone (its loss not yet seen by the watcher)
    std::vector<uint32_t> order;
    std::optional<uint32_t> was;
    {
      std::lock_guard<std::mutex> guard(state_->mtx);
      order = state_->policy.candidates(name, req.incarnation, preferred);
      was = state_->policy.node_of(name);
      // A move's target first; else a restarted shard with copies goes
      // first to the node holding them.
      if (auto pin = state_->plan.pin_of(name)) {
        auto at = std::find(order.begin(), order.end(), *pin);
        if (at != order.end())
          std::rotate(order.begin(), at, at + 1);
      } else if (auto it = state_->peer_of.find(name);
          copies && req.incarnation > 1 && it != state_->peer_of.end() && it->second >= 0) {
        auto peer = std::find(order.begin(), order.end(), static_cast<uint32_t>(it->second));
        if (peer != order.end())
          std::rotate(order.begin(), peer, peer + 1);
      }
    }
    for (auto i : order) {
      node_handle h;
      int peer = -1;
      node_load load;
      {
        // Reserved before the spawn, which blocks: children restarted
        // meanwhile (other supervisors) count it on node i.
        std::lock_guard<std::mutex> guard(state_->mtx);
        if (!state_->policy.alive(i))
          continue;
        load = state_->policy.load(i);
        state_->policy.place(name, i);
        h = state_->handles[i];
        if (copies) {
          peer = state_->peer_node(i);
          req.shard.peer_replica = peer >= 0 ? state_->replicas[peer] : caf::actor{};
        }
      }
      // A client's worker back on the client it ran on: the client has the
      // model built, so it answers at once unless it died with the worker
      // (its loss not seen yet), which this bound finds sooner.
      auto timeout = cfg_.spawn_timeout;
      if (name.is(actor_kind::worker) && cfg_.client_workers > 0 && req.incarnation > 1 && was == i)
        timeout = std::min(timeout, 2 * cfg_.settings.connection_timeout);
      auto child = spawn_on(h, req, timeout);
      if (child) {
        {
          std::lock_guard<std::mutex> guard(state_->mtx);
          if (copies)
            state_->peer_of[name] = peer;
        }
        auto moved = move_started(state_, name);
        poke_if_left_drained(state_, was);
        tell_placed(state_, name, i, req.incarnation > 1 ? was : std::nullopt, load, moved);
        return child;
      }
      tried += (tried.empty() ? "" : "; ") + state_->node_name(i) + ": " + describe(child.error());
      only_gone = only_gone && is(child.error(), errc::shutting_down);
    }
    std::unique_lock<std::mutex> lock(state_->mtx);
    if (!order.empty() && only_gone && std::chrono::steady_clock::now() < deadline) {
      // Its loss is about to be seen (the watcher monitors it too): the
      // next round's candidates leave it out, or wait for a node as below.
      state_->changed.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
      tried.clear();
      continue;
    }
    // A worker whose loop runs in a client waits for a client serving it,
    // one of keel's own workers with worker slots for a node with a free
    // one; any other child for a node.
    const bool client_loop = name.is(actor_kind::worker) &&
                             (state_->policy.client_loops() || state_->policy.worker_slots() > 0);
    if (!order.empty()) {
      if (client_loop)
        state_->unplaced_since.erase(name);
      else
        state_->none_live_since.reset();
      break;
    }
    auto live = [&] {
      for (uint32_t i = 0; i < state_->policy.nodes(); ++i)
        if (state_->policy.takes(i, name))
          return true;
      return false;
    };
    auto now = std::chrono::steady_clock::now();
    auto& since = client_loop ? state_->unplaced_since.try_emplace(name, now).first->second
                              : (state_->none_live_since ? *state_->none_live_since
                                                         : state_->none_live_since.emplace(now));
    auto given_up = since + cfg_.node_wait;
    if (now >= given_up) {
      auto ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count());
      tried = !client_loop ? "none has taken children for " + ms + " ms: every node of the job is lost or "
                             "draining (keel cluster --node-wait-ms)"
              : state_->policy.client_loops()
                ? "no client process running its loop has been live for " + ms + " ms (keel cluster --node-wait-ms)"
                : "no live node has had a free worker slot for " + ms + " ms (keel cluster --worker-slots " +
                    std::to_string(state_->policy.worker_slots()) + ", --node-wait-ms)";
      if (name.is(actor_kind::worker)) {
        // It may leave the job instead (training_config::min_workers).
        lock.unlock();
        auto left = ask_job_workers(state_, caf::make_message(worker_lost_atom::value, name.index),
                                    to_string(name) + " leaving", cfg_.spawn_timeout);
        if (!left) {
          tried += "; " + describe(left.error());
          break;
        }
        std::lock_guard<std::mutex> guard(state_->mtx);
        state_->policy.forget(name);  // it runs nowhere now
        state_->unplaced_since.erase(name);
        return make_error(errc::not_found, to_string(name) + " leaves the job: " + tried);
      }
      break;
    }
    if (now >= deadline)
      break;  // this start's own bound: its supervisor tries again
    state_->changed.wait_until(lock, std::min(deadline, given_up), live);
    // The next round starts on the node that came back, or says why not.
  }
  return make_error(errc::not_found, "cannot start " + to_string(name) + " on any node (" +
                                       (tried.empty() ? "none is live" : tried) + ")");
}

caf::expected<caf::actor> cluster_placement::start_shard(caf::actor_system&, uint64_t incarnation,
                                                         const parameter_shard_config& cfg) {
  // A shard with tables builds its rows' initial values from the model.
  auto req = make_spawn_request(cfg, incarnation, cfg.core.tables.empty() ? model_spec{} : cfg_.model);
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    state_->policy.estimate(req.id, estimated_shard_bytes(cfg.core.dense.size() + cfg.core.sparse.size(),
                                                          static_cast<uint32_t>(dense_slots(cfg.core))));
  }
  {
    // What a pre-copy of this shard asks its next node for (its restore_from
    // is the newest committed ref then; initial values are not needed).
    auto kept = req;
    kept.shard.initial_dense.clear();
    kept.shard.initial_dense.shrink_to_fit();
    // No actor handles: a pre-copy needs none, and the placement's state
    // outlives the job's actor system, which would wait for their actors.
    kept.shard.directory = caf::actor{};
    kept.shard.peer_replica = caf::actor{};
    kept.shard.restore_replica = caf::actor{};
    std::lock_guard<std::mutex> guard(state_->mtx);
    state_->shard_requests[req.id] = std::move(kept);
  }
  if (cfg_.peer_copy && incarnation > 1) {
    // The replica the previous incarnation sent its copies to, while its node lives.
    std::lock_guard<std::mutex> guard(state_->mtx);
    if (auto it = state_->peer_of.find(req.id); it != state_->peer_of.end() && it->second >= 0 &&
                                                state_->policy.alive(it->second))
      req.shard.restore_replica = state_->replicas[it->second];
  }
  return start(cfg.core.shard, std::move(req));
}

caf::expected<caf::actor> cluster_placement::start_worker(caf::actor_system&, uint64_t incarnation,
                                                          const worker_config& cfg) {
  // Every node's data plane, so the worker's pushes and pulls go straight
  // to whichever node runs a shard (now or after a restart).
  auto req = make_spawn_request(worker_spawn{cfg, cfg_.model, routes_of(state_), cfg_.client_workers > 0},
                                incarnation);
  // Workers start after the shards' nodes, so a small cluster mixes both.
  return start(cfg.core.worker + static_cast<uint32_t>(cfg.core.parts.size()), std::move(req));
}

void cluster_placement::committed(const std::vector<committed_shard>& shards) {
  caf::actor watcher;
  {
    std::lock_guard<std::mutex> guard(state_->mtx);
    uint64_t step = UINT64_MAX;
    for (auto& s : shards) {
      uint64_t bytes = s.snapshot.entry.bytes;
      for (auto& link : s.snapshot.entry.chain) bytes += link.bytes;
      state_->policy.weigh(actor_id::shard(s.shard), bytes);
      state_->newest_refs[actor_id::shard(s.shard)] = s.snapshot;
      step = std::min(step, s.step);
    }
    if (!shards.empty())
      state_->plan.committed(step);
    if (state_->plan.settle())
      watcher = state_->watcher;
  }
  if (watcher)
    caf::anon_send(watcher, next_move_atom::value);
}

std::optional<node_address> parse_node_address(const std::string& text, std::string& why) {
  auto item = text;
  auto at = item.find('@');
  std::string name = at == std::string::npos ? std::string() : item.substr(0, at);
  if (at != std::string::npos && name.empty()) {
    why = "'" + text + "' has an empty NAME before '@'";
    return std::nullopt;
  }
  if (at != std::string::npos)
    item = item.substr(at + 1);
  auto colon = item.rfind(':');
  auto port = colon == std::string::npos ? std::string() : item.substr(colon + 1);
  if (colon == 0 || colon == std::string::npos || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) == 0 ||
      std::stoul(port) > 65535) {
    why = "'" + item + "' is not HOST:PORT with a port in 1..65535";
    return std::nullopt;
  }
  return node_address{item.substr(0, colon), static_cast<uint16_t>(std::stoul(port)), name};
}

std::string cluster_placement::where() const {
  std::lock_guard<std::mutex> guard(state_->mtx);
  std::string out;
  for (auto& [child, node] : state_->policy.placed())
    out += (out.empty() ? "" : ", ") + to_string(child) + "@" + state_->node_name(node);
  return out;
}

int cluster_placement::node_of(actor_id child) const {
  std::lock_guard<std::mutex> guard(state_->mtx);
  auto node = state_->policy.node_of(child);
  return node ? static_cast<int>(*node) : -1;
}

}  // namespace keel
