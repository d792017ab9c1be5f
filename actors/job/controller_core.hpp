#pragma once
// A controller_core is the job controller's lifecycle as a plain value: the
// phase the run is in (starting, running, rolling back, finishing,
// stopping, ended) and its epoch, the rules that follow from them, and for
// each event that moves the run (a tree launched or up, the root down, a
// rollback, a stop, the end) the action the controller carries out. It sends
// nothing and owns no actor: job_controller.cpp feeds it events and does
// what it returns. Not thread-safe (the controller's thread owns it).
//
// The rules, as the controller relies on them:
//  - requests wait while a tree is (re)started (starting, rolling back) and
//    are served only while one runs; once the job has ended they fail;
//  - workers' reports count only while a tree starts or runs, and only
//    those of the current epoch (one more per rollback);
//  - the root going down fails a start, escalates or rolls a running tree
//    back, and means nothing once the run stops on purpose;
//  - a stop ends a running tree; one asked while the run finishes or stops
//    is answered with the end; the run ends once.

#include <cstdint>

namespace keel {

enum class run_phase {
  starting,      // a tree launched, not yet up
  running,       // the tree runs; the workers train
  rolling_back,  // the old tree goes down before the checkpoint is read
  finishing,     // every shard read complete: evaluating, then draining
  stopping,      // job::stop: the tree goes down, its events are drained
  ended,         // the outcome is with the event feed
};

const char* to_string(run_phase p);

// What the controller does next.
enum class controller_action {
  none,         // nothing: the event means nothing now
  hold,         // keep the request until the tree runs again (or the job ends)
  serve,        // carry the request out on the running tree
  refuse,       // answer that the job is not running (errc::shutting_down)
  launch,       // start the first tree
  follow_tree,  // the tree answered: follow its events and names, then up()
  fail,         // end the job with the failure at hand
  escalate,     // record root's escalation and end the job with it
  roll_back,    // roll the tree back to the newest valid checkpoint
  stop_tree,    // stop the tree, drain its events, then end the job stopped
  join_stop,    // answer the stop when the job ends
};

const char* to_string(controller_action a);

class controller_core {
 public:
  run_phase phase() const { return phase_; }
  uint32_t epoch() const { return epoch_; }

  // --- Rules ---
  bool running() const { return phase_ == run_phase::running; }
  bool ended() const { return phase_ == run_phase::ended; }
  // A tree is being (re)started: requests wait for it.
  bool restarting() const { return phase_ == run_phase::starting || phase_ == run_phase::rolling_back; }
  // A worker's report of `epoch` counts.
  bool takes_report(uint32_t epoch) const {
    return (phase_ == run_phase::running || phase_ == run_phase::starting) && epoch == epoch_;
  }
  // A read of the parameters begun in `epoch` still counts.
  bool read_counts(uint32_t epoch) const { return phase_ == run_phase::running && epoch == epoch_; }

  // --- Events, each with the action that follows ---
  // job::start: launch, or refuse once begun (`begun`: a tree or a start is
  // under way already).
  controller_action begin(bool begun) const;
  // A tree was launched: the run starts (again).
  void launched() { phase_ = run_phase::starting; }
  // The root of a tree answered; `current`: it is the tree launched last.
  controller_action tree_answered(bool current) const;
  // The tree is up: the workers train.
  void up() { phase_ = run_phase::running; }
  // The current tree's root went down (`escalated`: with errc::escalated).
  controller_action root_down(bool escalated) const;
  // A request the running tree serves (read, rows, table, move, inject,
  // change the workers).
  controller_action request() const;
  // job::kill: held while a tree restarts, else carried out (it reports
  // itself what it finds).
  controller_action kill() const { return restarting() ? controller_action::hold : controller_action::serve; }
  // job::stop: running -> stopping (stop_tree).
  controller_action stop();
  // A worker asks for a rollback in `epoch`.
  controller_action rollback_requested(uint32_t epoch) const;
  // The placement lost a worker: it may leave while the run starts, runs
  // or rolls back (serve), not after (refuse).
  controller_action worker_lost() const;
  // A rollback was admitted: the old tree's reports are stale from here.
  void rolling_back() {
    ++epoch_;
    phase_ = run_phase::rolling_back;
  }
  // Every shard read complete: the run evaluates, then drains.
  void finishing() { phase_ = run_phase::finishing; }
  // The run ends. `first`: it had not ended before (else nothing follows);
  // `stopped`: it ended by job::stop.
  struct ending {
    bool first = false;
    bool stopped = false;
  };
  ending end();

 private:
  run_phase phase_ = run_phase::starting;
  uint32_t epoch_ = 0;  // stamps the workers' reports; +1 per rollback
};

}  // namespace keel
