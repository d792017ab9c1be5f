#pragma once
// The fault driver injects a fault plan (fault_plan.hpp) into a running
// job. It owns the plan's state (which faults fired, which message counts
// were reached, which killed actors are not back yet) and the two injection
// points the actors consult: the link faults every shard and worker applies
// to its messages, and the faulty_io the checkpointer writes through. What
// it cannot do itself (end an actor, add a line to the timeline) it asks of
// the runtime through fault_hooks, so the same driver serves a job in one
// process and a cluster across several. Every fault it injects is recorded
// as an event named as the plan spells it; a fault that cannot be injected
// (its target is down) is recorded with the reason and does not stop the
// run. Owned by the job's controller actor; the message-count callbacks
// arrive on other actors' threads and only call `on_count`, which must be
// thread-safe (the job's sends a message to its controller). Ending an actor
// may have to wait for its name to be up, and faulting a node for a process
// to be signalled or started, so kills and node faults complete through a
// callback the runtime calls later, on the controller's thread.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "actors/core/job_event.hpp"
#include "actors/faults/fault_plan.hpp"

namespace keel {

class faulty_io;
class link_faults;

// What the driver needs from the runtime it injects into.
class fault_hooks {
 public:
  virtual ~fault_hooks() = default;
  // Ends the actor named `name`: fault_kind::kill (CAF's kill), exit (a quit
  // with an error) or raise (an exception thrown in one of its handlers).
  // Calls `done` exactly once, now or later (while `name` restarts the
  // runtime waits, bounded, for its next incarnation), with an error naming
  // the actor when it cannot be found.
  virtual void end_actor(const std::string& name, fault_kind how,
                         std::function<void(caf::error)> done) = 0;
  // Adds an event to the timeline (the runtime stamps its time).
  virtual void record(job_event e) = 0;
  // Ends or stops node `node`'s process: kill9 (SIGKILL), stop (SIGSTOP),
  // cut (SIGSTOP, then SIGCONT after `away`), crash (armed to SIGKILL itself
  // mid-write, as SIGUSR1 asks keel node); calls `done` exactly once, now
  // or later, with what happened. Only a runtime that owns node processes
  // can; the default refuses.
  virtual void node_fault(uint32_t node, fault_kind how, std::chrono::milliseconds away,
                          std::function<void(caf::error)> done);
};

class fault_driver {
 public:
  // `plan` must have passed check_fault_plan. `on_count(i)` is called (on an
  // actor thread) when the message count that triggers plan[i] is reached;
  // the runtime then calls count_reached(i) on its own thread.
  fault_driver(std::vector<fault> plan, std::filesystem::path checkpoint_dir, fault_hooks& hooks,
               std::function<void(size_t)> on_count);

  const std::shared_ptr<link_faults>& links() const { return links_; }
  const std::shared_ptr<faulty_io>& disk() const { return disk_; }

  // What became of an injection: an error says why it could not be made.
  using outcome_fn = std::function<void(caf::error)>;

  // Injects `f` now, whatever its trigger says; `done` (may be empty) learns
  // the outcome once it is known (a kill's when its target was found, a node
  // fault's when the runtime carried it out).
  void inject(const fault& f, outcome_fn done);

  // Ends an actor now and records it as a fault (job::kill); `done` as for inject.
  void end_actor(const std::string& name, fault_kind how, outcome_fn done);

  void count_reached(size_t i);
  // Injects every fault whose step, time or count has come, in plan order.
  // A second kill of an actor waits until it is back (two kills are two
  // crashes, not one incarnation killed twice); a kill counts as not back
  // from the moment it fires, and as never fired if it fails.
  void fire_due(uint64_t slowest_step, int64_t now_ms);
  // `name` has (re)started: a pending kill of it may fire.
  void back(const std::string& name) { not_back_.erase(name); }
  // A resumed run starts after `step`: faults triggered at steps up to it
  // belonged to the run before and are not injected.
  void skip_through(uint64_t step);
  // The whole tree restarted.
  void all_back() { not_back_.clear(); }
  // How long until the next timed fault is due (`cap` if none is sooner).
  std::chrono::milliseconds until_next(std::chrono::milliseconds cap, int64_t now_ms) const;

  // The faults injected so far, as parse_fault_plan reads them.
  const std::string& injected() const { return injected_; }

  // Ends the run's injection: records a fault event ("not injected: why")
  // for every planned fault that never came due before the run ended (a
  // kill waiting for its target to come back from an earlier one
  // included), and returns the planned faults that did not take effect,
  // each as "FAULT: why": those, and those whose injection failed (already
  // recorded when they failed). Faults a resumed run skipped (skip_through)
  // are not among them: they belonged to the run before. A
  // failure-injection test checks the list is empty: a fault that never
  // fired proves nothing.
  std::vector<std::string> close_run();
  // How many planned faults took effect so far (fired and injected).
  size_t planned_injected() const { return planned_injected_; }

 private:
  caf::error flip_newest_snapshot(const fault& f);
  // Injects a fault that is neither a kill nor a node fault, at once.
  caf::error inject_now(const fault& f);
  // Records what injecting `f` did.
  void record_injection(const fault& f, const caf::error& err);

  std::vector<fault> plan_;
  std::filesystem::path dir_;
  fault_hooks& hooks_;
  std::shared_ptr<link_faults> links_;
  std::shared_ptr<faulty_io> disk_;
  std::vector<bool> fired_;
  std::vector<bool> counted_;
  std::set<std::string> not_back_;  // actors a kill fault ended, not yet restarted
  std::string injected_;
  std::vector<std::string> failed_;  // planned faults whose injection failed, with the reason
  size_t planned_injected_ = 0;
};

}  // namespace keel
