#pragma once
// The inside of keel::job, shared by job.cpp (the controller's loop),
// job_tree.cpp (the supervision tree it runs) and job_result.cpp (the final
// read-out). Not part of the public API.

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <caf/all.hpp>

#include "actors/atoms.hpp"
#include "actors/job.hpp"
#include "actors/faults/link_faults.hpp"
#include "storage/faulty_io.hpp"
#include "actors/partition.hpp"
#include "actors/worker.hpp"
#include "supervision/directory.hpp"
#include "supervision/events.hpp"
#include "supervision/supervisor.hpp"

namespace keel {


// The snapshots of the last committed checkpoints, newest first, shared
// with the shard specs' snapshot source (read on supervisor threads).
class committed_snapshots {
 public:
  explicit committed_snapshots(size_t keep) : keep_(keep) {}
  void add(uint64_t checkpoint, std::vector<frame_ptr> by_shard);
  std::vector<supervision::snapshot> for_shard(uint32_t shard) const;
  void clear();

 private:
  mutable std::mutex mtx_;
  size_t keep_;
  std::deque<std::pair<uint64_t, std::vector<frame_ptr>>> newest_first_;
};

struct job::impl {
  job_config cfg;
  std::unique_ptr<caf::actor_system_config> sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> ctl;
  std::optional<supervision::tree> tree;
  std::vector<shard_keys> parts;
  std::vector<shard_config> shard_cfgs;
  std::shared_ptr<committed_snapshots> committed;
  std::vector<frame_ptr> start_from;  // a rollback's checkpoint, by shard (empty: fresh)
  uint32_t epoch = 0;
  std::map<std::string, caf::actor> handles;  // directory name -> current handle
  std::set<uint32_t> done;
  std::vector<uint64_t> worker_step;
  std::map<uint32_t, worker_report> reports;  // the last report of each worker
  std::vector<fault> plan;      // kills and faults, in the order given
  std::vector<bool> fired;      // by plan index
  std::vector<bool> counted;    // by plan index: its message count was reached
  std::set<std::string> not_back;  // actors a kill fault killed, not yet restarted
  std::shared_ptr<link_faults> links;
  std::shared_ptr<faulty_io> disk;
  std::deque<std::chrono::steady_clock::time_point> rollback_times;  // within restart_period
  // Since when every worker has waited at the checkpoint window.
  std::optional<std::chrono::steady_clock::time_point> stalled_since;
  uint64_t last_progress = 0;
  uint64_t released_step = 0;   // the newest checkpoint step committed, failed or lost
  uint64_t forwarded_step = 0;  // the newest snapshot step sent to the checkpointer
  double loss_sum = 0;
  uint64_t loss_count = 0;
  std::function<void(const job_event&)> on_event;
  job_result result;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  std::string progress_text() const;
  // job_tree.cpp
  caf::error start_tree();
  supervision::supervisor_spec root_spec();
  // job_result.cpp
  // Reads every shard's parameters into `result`: true once every shard
  // holds every push, false when one lacks some or is restarting. Mid-run
  // readers (progress, job::parameters) read every shard whatever it holds;
  // the end of the run stops at the first incomplete shard and retries.
  // Reading mid-run fails (errc::not_found) while a shard is restarting.
  caf::expected<bool> read_parameters(bool stop_at_incomplete);
  // Completes `result` from the parameters read, evaluates, stops the tree.
  caf::expected<job_result> finish();

  void record(job_event e);
  // Widens the workers' window to `step` + 2 checkpoint intervals.
  void release(uint64_t step);
  void send_window(const caf::actor& worker);
  // The current handle of `name` in the running tree, waiting (bounded)
  // while it restarts.
  caf::expected<caf::actor> resolve(const std::string& name, caf::timespan timeout);
  // Stops the tree, then records every event its actors sent before they
  // stopped (the event stream stops after forwarding them), so a result's
  // timeline is complete.
  void stop_tree_and_drain();
  int64_t elapsed_ms() const;
};

// job_faults.cpp: injects one fault now (the event names it as the plan
// spells it); injects every fault whose trigger has come; how long the wait
// loop may sleep before the next timed fault or window check (`cap` at most).
caf::error inject_fault(job::impl& j, job& owner, const fault& f);
void fire_due_faults(job::impl& j, job& owner);
std::chrono::milliseconds until_next_timed(const job::impl& j, std::chrono::milliseconds cap);

}  // namespace keel
