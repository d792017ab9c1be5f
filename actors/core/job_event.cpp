#include "actors/core/job_event.hpp"

namespace keel {

const char* to_string(event_kind k) {
  switch (k) {
    case event_kind::start: return "start";
    case event_kind::down: return "down";
    case event_kind::restart: return "restart";
    case event_kind::escalate: return "escalate";
    case event_kind::shutdown: return "shutdown";
    case event_kind::fault: return "fault";
    case event_kind::damage: return "damage";
    case event_kind::rollback: return "rollback";
    case event_kind::restored: return "restored";
    case event_kind::replay: return "replay";
    case event_kind::resume: return "resume";
    case event_kind::retry: return "retry";
    case event_kind::skipped_step: return "skipped_step";
    case event_kind::checkpoint: return "checkpoint";
    case event_kind::checkpoint_failed: return "checkpoint_failed";
    case event_kind::backpressure: return "backpressure";
    case event_kind::resumed: return "resumed";
    case event_kind::discarded: return "discarded";
    case event_kind::damaged: return "damaged";
    case event_kind::progress: return "progress";
    case event_kind::node_down: return "node_down";
    case event_kind::node_up: return "node_up";
    case event_kind::placed: return "placed";
    case event_kind::membership: return "membership";
    case event_kind::released: return "released";
  }
  return "unknown";
}

std::string to_string(const job_event& e) {
  std::string s = std::to_string(e.at_ms) + "ms " + to_string(e.kind) + " " + e.actor;
  if (!e.detail.empty())
    s += ": " + e.detail;
  return s;
}

}  // namespace keel
