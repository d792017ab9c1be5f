#pragma once
// A job_event is one line of a training job's timeline: a fault injected, an
// actor down or restarted, a shard restored (with how many pushes were
// replayed), a rollback, an escalation, a retry, a skipped step, a
// checkpoint, a progress report. Workers, the checkpointer and the job itself
// emit them; supervision events are folded in by the job. Each kind carries
// typed fields that readers (recovery summaries, reports, plots, metrics)
// use; `detail` is prose for people and is never parsed back. Plain
// inspectable values, so they cross processes and the CLI prints them.

#include <cmath>
#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

#include "actors/core/fault_kind.hpp"
#include "messages/wire_bits.hpp"

namespace keel {

enum class event_kind : uint8_t {
  // Folded in from the supervision tree (supervision::event_kind).
  start,              // a child's first incarnation started
  down,               // a child stopped on its own (`failed`: with an error)
  restart,            // a child's new incarnation: `snapshot` names what it restored from
  escalate,           // a supervisor (or the job, for "root") gave up
  shutdown,           // a child stopped on purpose
  // Faults.
  fault,              // a fault injected: `fault` is its text form, `killed` if it ended an actor
  damage,             // a stored file damaged on purpose (flip)
  // Recovery.
  rollback,           // the tree rolls back to the last valid checkpoint: `detail` says why
  restored,           // the rolled-back tree starts: `checkpoint`/`step` (0/0: from scratch)
  replay,             // a worker resent `count` pushes to `peer` (a restarted shard)
  resume,             // a restarted worker continues at `step`
  retry,              // a request timed out or failed and is retried
  skipped_step,       // a worker skipped `step` (its gradient was not finite)
  // Checkpoints.
  checkpoint,         // `checkpoint` committed at `step`
  checkpoint_failed,  // the checkpoint at `step` failed (`failed`: writing it) or was lost; the
                      // previous stays in force. Repeats of one failure are summarised (`count`)
  discarded,          // `checkpoint` discarded: newer than the one a rollback restored
  backpressure,       // worker `actor` paused before `step`: its replay log holds `count` bytes, over its bound
  resumed,            // worker `actor` resumed at `step` (a checkpoint committed); its log holds `count` bytes
  damaged,            // a stored file failed validation during a rollback
  // Progress.
  progress,           // at `step`: mean training `loss`, held-out `accuracy`, `samples_per_second`
  // Nodes (a cluster run).
  node_down,          // node `actor` ("node:1") lost: `peer` lists the children it ran
  node_up,            // node `actor` joined or came back
  placed,             // child `actor` started on node `peer` (`count`: 1 when a move put it there)
  membership,         // node `actor`: the plan's `fault` (drain, join) carried out, or `failed`
  released,           // node `actor` drained: nothing of the job runs there any more
};

// The last kind, for readers that go through them all.
constexpr event_kind last_event_kind = event_kind::released;

// The kind's name as reports and the CLI print it ("checkpoint_failed").
const char* to_string(event_kind k);

struct job_event {
  event_kind kind = event_kind::progress;
  // The stable name concerned, as text: an actor id (actors/core/actor_id.hpp)
  // such as "shard:1", or what a storage event is about (a file). Readers
  // that dispatch on it parse it with parse_actor_id.
  std::string actor;
  std::string detail;           // human-readable specifics
  int64_t at_ms = 0;            // milliseconds since the job started
  int64_t at_us = 0;            // when the job recorded it, microseconds since the job started
  uint64_t count = 0;           // replay: pushes resent; restart: the incarnation;
                                // checkpoint_failed: failures in the series; backpressure, resumed: log bytes
  uint64_t step = 0;            // progress, resume, skipped_step, checkpoint*, restored
  uint64_t checkpoint = 0;      // checkpoint, discarded, restored
  std::string peer;             // replay: the shard replayed to
  std::string snapshot;         // restart: the snapshot label restored from ("" fresh)
  std::string fault;            // fault: the fault as a plan spells it
  fault_kind how = fault_kind::kill;  // fault, damage: its kind, when `fault` is set
  bool killed = false;          // fault: it ended an actor (kill, exit or raise)
  bool failed = false;          // down: with an error (not a normal exit); checkpoint_failed: a write failed
  double loss = NAN;            // progress: mean training loss since the last one
  double accuracy = NAN;        // progress: held-out accuracy (NaN: not scored)
  double samples_per_second = 0;  // progress
  // progress: pushes the workers know applied (a worker completes a step
  // only when every shard acknowledged its push), summed over workers.
  uint64_t pushes_acked = 0;
  // progress: the shards' applied seqs summed, when the progress read the
  // shards' parameters (progress_config::accuracy); 0 when it did not read them.
  uint64_t pushes_applied = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_event& x) {
  using wire::bits;  // doubles as their bits (messages/wire_bits.hpp)
  return f(caf::meta::type_name("keel.job_event"), x.kind, x.actor, x.detail, x.at_ms, x.at_us,
           x.count, x.step, x.checkpoint, x.peer, x.snapshot, x.fault, x.killed, x.failed, bits(x.loss),
           bits(x.accuracy), bits(x.samples_per_second), x.pushes_acked, x.pushes_applied, x.how);
}

// An event of `kind` about `actor`; the job stamps its time on receipt.
inline job_event make_job_event(event_kind kind, std::string actor, std::string detail) {
  job_event e;
  e.kind = kind;
  e.actor = std::move(actor);
  e.detail = std::move(detail);
  return e;
}

// "432ms restart shard:0: restart shards/shard:0 #2 from snapshot checkpoint-1"
std::string to_string(const job_event& e);

}  // namespace keel
