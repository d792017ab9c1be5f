#pragma once
// A job_event is one line of a training job's timeline: a fault injected, an
// actor down or restarted, a shard restored (with how many pushes were
// replayed), a rollback, an escalation, a retry, a skipped step. Workers, the
// checkpointer and the job itself emit them; supervision events are folded in
// by the job. Plain inspectable values, so the CLI and reports print them.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace keel {

struct job_event {
  std::string kind;     // fault, down, restart, restored, rollback, escalate, retry, skipped_step, checkpoint
  std::string actor;    // the stable name concerned, e.g. "shard:1"
  std::string detail;   // human-readable specifics
  int64_t at_ms = 0;    // milliseconds since the job started
  uint64_t count = 0;   // restored: pushes replayed; checkpoint: its step
  int64_t at_us = 0;    // when the job recorded it, microseconds since the job started
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_event& x) {
  return f(caf::meta::type_name("keel.job_event"), x.kind, x.actor, x.detail, x.at_ms, x.count,
           x.at_us);
}

// An event as an actor reports it; the job stamps its time on receipt.
inline job_event make_job_event(std::string kind, std::string actor, std::string detail,
                                uint64_t count = 0) {
  job_event e;
  e.kind = std::move(kind);
  e.actor = std::move(actor);
  e.detail = std::move(detail);
  e.count = count;
  return e;
}

inline std::string to_string(const job_event& e) {
  std::string s = std::to_string(e.at_ms) + "ms " + e.kind + " " + e.actor;
  if (!e.detail.empty())
    s += ": " + e.detail;
  return s;
}

}  // namespace keel
