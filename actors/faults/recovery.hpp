#pragma once
// A recovery is one fault and what the job did about it, read back from the
// job's timeline (job_result::events): which actor failed and when, how long
// until it served again, what it was restored from, and how many pushes the
// workers replayed to it. recoveries() is a pure function of the timeline, so
// the CLI, reports and tests all read the same account; it never fails, and
// a timeline it cannot pair (a kill never followed by a restart) yields a
// recovery that "did not come back".

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/job_event.hpp"

namespace keel {

struct recovery {
  std::string victim;       // the stable name that failed: "shard:0", "workers", "root", ...
  std::string kind;         // recovery_kind(victim): shard, worker, checkpointer, supervisor, root
  std::string fault;        // the fault event's detail, or a rollback's reason
  int64_t fault_at_us = 0;  // when the fault was recorded, microseconds since the job started
  // From the fault to the victim's next restart (root: to the rolled-back
  // tree's "restored"); nullopt if it never came back.
  std::optional<int64_t> served_after_us;
  // The restart's snapshot label, "fresh" (no valid snapshot or checkpoint),
  // or for a rollback the checkpoint it went back to ("checkpoint 3 at step 40").
  std::string restored_from;
  // It came back through a rollback of the whole tree, not a restart of its own.
  bool rolled_back = false;
  // It began with a fault that ended the victim (not a rollback a worker asked for).
  bool killed = false;
  // Pushes the workers resent to the victim (for "shards" and "root": to any
  // shard) after it came back, until it failed again.
  uint64_t replayed = 0;
  // A node fault: from the fault until the job saw the node down (nullopt:
  // never), and the children the node ran. The node serves again when every
  // one of them has restarted elsewhere.
  std::optional<int64_t> detected_after_us;
  std::vector<std::string> children;
};

// The kind of the actor `name` (actors/core/actor_id.hpp) as a recovery
// reports it: "shard" for "shard:3", "worker" for "worker:0", "node" for
// "node:1", "supervisor" for the "shards" and "workers" supervisors,
// "checkpointer", "root"; a name that is no actor's is its own kind.
std::string recovery_kind(const std::string& name);

// Every recovery in `timeline`, in the order of their faults. A recovery
// starts at each fault that killed an actor and at each rollback of
// "root" that no kill of root preceded. A kill pairs with the victim's next
// "restart"; a kill of root, or a rollback, with the next "restored" of
// root, which also brings back every victim still waiting for its restart.
// Each "replay" event counts toward the latest recovery, back by then, of
// the shard it names (or of a supervisor above that shard).
std::vector<recovery> recoveries(const std::vector<job_event>& timeline);

// True when `r` began with a kill rather than a rollback a worker asked for.
bool after_kill(const recovery& r);

// One line, e.g. "shard:0 killed (exit_reason::kill) at 1234.5 ms: serving
// again after 0.61 ms, restored from snapshot ckpt-3, 12 pushes replayed",
// or "worker:1 killed (...) at 80.2 ms: did not come back".
std::string to_string(const recovery& r);

}  // namespace keel
