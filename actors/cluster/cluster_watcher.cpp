// The placement's node watcher (cluster_placement_state.hpp): a down agent
// is a lost node; lost nodes are tried again at their address; membership
// moves run on its thread.
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/cluster_placement_state.hpp"

namespace keel {

// Watches every node's agent: a down agent is a lost node; lost nodes are
// tried again at their address until one answers (restarted on its port).
// Detached: reconnecting blocks.
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
  return {
    [self, st](reconnect_atom) {
      std::vector<uint32_t> lost;
      {
        std::lock_guard<std::mutex> guard(st->mtx);
        for (uint32_t i = 0; i < st->policy.nodes(); ++i)
          if (!st->policy.alive(i) && !st->released[i])
            lost.push_back(i);
      }
      for (auto i : lost) {
        node_address addr;  // a copy: joins grow the list on another thread
        {
          std::lock_guard<std::mutex> guard(st->mtx);
          addr = st->cfg.nodes[i];
        }
        auto h = connect_node(self->system(), addr.host, addr.port, st->cfg.secret,
                              st->cfg.settings.connection_timeout, {}, tls_peer{st->cfg.tls, addr.identity()});
        if (!h)
          continue;
        self->monitor(h->agent);
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
        st->changed.notify_all();
        poke_if_left_drained(st, i);
        resume_pending_drains(st);
        tell_routes(self->system(), st);
        tell_job(st, event_kind::node_up, i,
                 "back at " + addr.host + ":" + std::to_string(addr.port) + " (node " + h->node + ")");
      }
      if (lost.size() > 0)
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
