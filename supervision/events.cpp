#include "supervision/events.hpp"

#include <algorithm>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "messages/errors.hpp"
#include "supervision/protocol.hpp"

namespace keel::supervision {

const char* to_string(event_kind k) {
  switch (k) {
    case event_kind::start: return "start";
    case event_kind::down: return "down";
    case event_kind::restart: return "restart";
    case event_kind::escalate: return "escalate";
    case event_kind::shutdown: return "shutdown";
  }
  return "unknown";
}

std::string to_string(const event& e) {
  std::string out = to_string(e.kind);
  out += ' ';
  out += e.supervisor + "/" + e.child;
  if (e.kind != event_kind::escalate)
    out += " #" + std::to_string(e.incarnation);
  switch (e.kind) {
    case event_kind::restart:
      out += e.from_snapshot ? " from snapshot " + e.snapshot_label : " fresh (no valid snapshot)";
      if (!e.snapshots_rejected.empty())
        out += " (" + std::to_string(e.snapshots_rejected.size()) + " rejected)";
      break;
    case event_kind::down:
      out += ": " + describe(e.reason);
      if (e.will_restart)
        out += "; restart in " + std::to_string(e.restart_delay_ns / 1000000) + " ms";
      break;
    case event_kind::escalate:
    case event_kind::shutdown:
      out += ": " + describe(e.reason);
      break;
    case event_kind::start:
      break;
  }
  return out;
}

namespace {

struct stream_state {
  std::vector<caf::actor> subscribers;
  caf::actor_addr owner;
  static inline const char* name = "keel.event_stream";
};

caf::behavior event_stream(caf::stateful_actor<stream_state>* self, caf::actor owner) {
  // Always spawned with an argument: CAF 0.17's spawn of a function without
  // one trips UBSan (CAF017.md, sanitizers).
  if (owner) {
    self->state.owner = owner.address();
    self->monitor(owner);
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    if (dm.source == self->state.owner) {
      self->quit();
      return;
    }
    auto& subs = self->state.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [&](const caf::actor& a) { return a.address() == dm.source; }),
               subs.end());
  });
  return {
    [=](follow_atom, const caf::actor& owner) {
      self->state.owner = owner.address();
      self->monitor(owner);
    },
    [=](subscribe_atom) {
      auto who = caf::actor_cast<caf::actor>(self->current_sender());
      if (who) {
        self->monitor(who);
        self->state.subscribers.push_back(std::move(who));
      }
      return caf::make_message(caf::ok_atom::value);
    },
    [=](unsubscribe_atom) {
      auto& subs = self->state.subscribers;
      auto who = self->current_sender();
      subs.erase(std::remove_if(subs.begin(), subs.end(),
                                [&](const caf::actor& a) { return a.address() == who; }),
                 subs.end());
    },
    [=](const event& e) {
      for (const auto& s : self->state.subscribers)
        self->send(s, e);
    },
  };
}

}  // namespace

caf::actor spawn_event_stream(caf::actor_system& sys, const caf::actor& owner) {
  return sys.spawn(event_stream, owner);
}

}  // namespace keel::supervision
