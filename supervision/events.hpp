#pragma once
// Every supervisor in a tree reports what it does to one event stream, an
// actor that forwards each event to its subscribers in the order it received
// them (so the events of one supervisor arrive in the order they happened).
// Subscribers are tests, the CLI and embedding applications; a subscriber
// that dies is dropped. Events are plain inspectable values.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

namespace keel::supervision {

enum class event_kind : uint8_t {
  start,     // a child's first incarnation started
  down,      // a child stopped on its own: reason, and whether it will restart
  restart,   // a child's new incarnation started: incarnation, from_snapshot
  escalate,  // a supervisor gave up (restart intensity exceeded): reason
  shutdown,  // a supervisor stopped a child on purpose: reason it stopped with
};

const char* to_string(event_kind k);

struct event {
  event_kind kind = event_kind::start;
  std::string supervisor;      // who reports
  std::string child;           // the child concerned (for escalate: the last to fail)
  uint64_t incarnation = 0;    // start/restart: the new one; down/shutdown: the one that stopped
  caf::error reason;           // down, escalate, shutdown
  bool will_restart = false;   // down: the supervisor will restart it
  int64_t restart_delay_ns = 0;  // down: backoff before that restart
  bool from_snapshot = false;  // restart: started from a snapshot
  std::string snapshot_label;  // restart: which one
  std::vector<std::string> snapshots_rejected;  // restart: "label: why" for each skipped
  int64_t at_ns = 0;           // the supervisor's clock, since its epoch
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, event& x) {
  return f(caf::meta::type_name("keel.supervision_event"), x.kind, x.supervisor, x.child,
           x.incarnation, x.reason, x.will_restart, x.restart_delay_ns, x.from_snapshot,
           x.snapshot_label, x.snapshots_rejected, x.at_ns);
}

// One line for logs and the CLI, e.g.
// "restart root/shard-0 #3 from snapshot step-1200 (1 rejected)".
std::string to_string(const event& e);

// Spawns an event stream. It runs until it gets an exit signal or until its
// owner (`owner`, or the actor named by a later (follow_atom, owner) message)
// is down, after forwarding everything that owner sent before.
caf::actor spawn_event_stream(caf::actor_system& sys, const caf::actor& owner = caf::actor{});

}  // namespace keel::supervision
