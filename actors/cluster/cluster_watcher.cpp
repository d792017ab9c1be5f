// The placement's node watcher (cluster_placement_state.hpp): a down agent
// is a lost node; lost nodes are tried again at their address, by a helper;
// membership moves run on the watcher's thread.
#include <atomic>
#include <memory>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/cluster_placement_state.hpp"

namespace keel {

namespace {

// Tries the lost nodes `lost` again at their addresses, on a thread of its
// own: connecting blocks (up to the connection timeout for a node that
// accepts the connection and never answers, a hung process), and the
// watcher must meanwhile go on with moves and downs. A node that answers
// is taken back, and the watcher is told to monitor its agent.
void reconnect(caf::actor_system& sys, const state_ptr& st, const std::vector<uint32_t>& lost,
               const caf::actor& watcher) {
  for (auto i : lost) {
    node_address addr;  // a copy: joins grow the list on another thread
    {
      std::lock_guard<std::mutex> guard(st->mtx);
      if (i >= st->cfg.nodes.size() || st->policy.alive(i) || st->plan.released(i))
        continue;
      addr = st->cfg.nodes[i];
    }
    auto h = connect_node(sys, addr.host, addr.port, st->cfg.secret, st->cfg.settings.connection_timeout, {},
                          tls_peer{st->cfg.tls, addr.identity()});
    if (!h)
      continue;
    caf::actor replica;
    if (st->cfg.peer_copy)
      if (auto r = replica_of(*h, st->cfg.settings.connection_timeout))
        replica = *r;
    {
      std::lock_guard<std::mutex> guard(st->mtx);
      if (i >= st->handles.size())  // detached meanwhile
        return;
      st->handles[i] = *h;
      st->policy.set_client(i, h->client_workers);
      st->policy.set_alive(i, true);
      st->replicas[i] = replica;
    }
    // Monitored once it counts as alive: a down before the watcher
    // monitors it still arrives (a monitor of a gone actor is answered
    // with its down) and finds the node alive.
    caf::anon_send(watcher, watch_node_atom::value, h->agent);
    st->changed.notify_all();
    poke_if_left_drained(st, i);
    resume_pending_drains(st);
    tell_routes(sys, st);
    tell_job(st, event_kind::node_up, i,
             "back at " + addr.host + ":" + std::to_string(addr.port) + " (node " + h->node + ")");
  }
}

}  // namespace

// Watches every node's agent: a down agent is a lost node; lost nodes are
// tried again at their address until one answers (restarted on its port),
// by one helper at a time. Detached: it shares its thread with no one
// while moves wait on nodes.
caf::behavior node_watcher(caf::event_based_actor* self, state_ptr st) {
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    for (auto& h : st->handles) self->monitor(h.agent);
  }
  self->set_down_handler([self, st](caf::down_msg& dm) {
    std::string children;
    uint32_t lost = 0;
    bool found = false;
    {
      std::lock_guard<std::mutex> guard(st->mtx);
      for (uint32_t i = 0; i < st->handles.size(); ++i)
        if (st->policy.alive(i) && st->handles[i].agent.address() == dm.source) {
          st->policy.set_alive(i, false);
          lost = i;
          found = true;
        }
      if (!found)
        return;
      for (auto child : st->policy.children_of(lost))
        children += (children.empty() ? "" : ",") + to_string(child);
    }
    tell_job(st, event_kind::node_down, lost,
             "lost (" + self->system().render(dm.reason) + "); its children: " +
               (children.empty() ? "none" : children),
             children);
    self->delayed_send(self, st->cfg.reconnect_every, reconnect_atom::value);
  });
  auto reconnecting = std::make_shared<std::atomic<bool>>(false);
  return {
    [self, st, reconnecting](reconnect_atom) {
      std::vector<uint32_t> lost;
      {
        std::lock_guard<std::mutex> guard(st->mtx);
        for (uint32_t i = 0; i < st->policy.nodes(); ++i)
          if (!st->policy.alive(i) && !st->plan.released(i))
            lost.push_back(i);
      }
      if (lost.empty())
        return;
      if (!reconnecting->exchange(true)) {
        auto watcher = caf::actor_cast<caf::actor>(self);
        self->spawn<caf::detached>([st, lost, watcher, reconnecting](caf::event_based_actor* h) {
          reconnect(h->system(), st, lost, watcher);
          *reconnecting = false;
        });
      }
      self->delayed_send(self, st->cfg.reconnect_every, reconnect_atom::value);
    },
    [self, st](next_move_atom) { start_next_move(self, st); },
    [self, st](pre_copy_done_atom, actor_id child, const std::string& why) {
      caf::actor job;
      {
        std::lock_guard<std::mutex> guard(st->mtx);
        job = st->job;
      }
      if (job)
        stop_for_move(self, st, pending_move{child, std::nullopt, why}, job);
    },
    [self](watch_node_atom, const caf::actor& agent) { self->monitor(agent); },
  };
}


}  // namespace keel
