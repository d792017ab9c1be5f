#pragma once
// The inside of keel::job: the controller's state and the parts it owns
// (checkpoint_coordinator, rollback_policy, fault_driver, each with its own
// header contract). Shared by job.cpp (the wait loop), job_tree.cpp (the
// supervision tree), job_recovery.cpp (rollback, resume), job_faults.cpp
// (the fault driver's hooks) and job_result.cpp (progress and the final
// read-out). Not part of the public API.

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <caf/all.hpp>

#include "actors/core/actor_id.hpp"
#include "actors/core/atoms.hpp"
#include "actors/core/checkpoint_coordinator.hpp"
#include "actors/core/partition.hpp"
#include "actors/core/shard_core.hpp"
#include "actors/faults/fault_driver.hpp"
#include "actors/job/job.hpp"
#include "actors/job/rollback_policy.hpp"
#include "actors/ps/checkpointer.hpp"
#include "actors/ps/worker.hpp"
#include "supervision/directory.hpp"
#include "supervision/events.hpp"
#include "supervision/supervisor.hpp"

namespace keel {


struct job::impl final : fault_hooks {
  ~impl() override;

  job_config cfg;
  std::unique_ptr<caf::actor_system_config> sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> ctl;
  std::optional<supervision::tree> tree;
  std::vector<shard_keys> parts;
  std::vector<shard_config> shard_cfgs;
  std::vector<frame_ptr> start_from;  // a rollback's checkpoint, by shard (empty: fresh)
  uint64_t restored_checkpoint = 0;   // its id (0: none)
  uint64_t resumed_step = 0;          // job_config::resume: the step the run resumed at
  uint32_t epoch = 0;
  std::map<actor_id, caf::actor> handles;  // the directory's names, parsed -> current handle
  std::set<uint32_t> done;
  std::vector<uint64_t> worker_step;
  std::map<uint32_t, worker_report> reports;  // the last report of each worker
  std::optional<checkpoint_coordinator> checkpoints;
  std::optional<rollback_policy> rollbacks;
  std::optional<fault_driver> faults;
  uint64_t last_progress = 0;
  double loss_sum = 0;
  uint64_t loss_count = 0;
  std::function<void(const job_event&)> on_event;
  job_result result;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  // fault_hooks (job_faults.cpp)
  caf::error end_actor(const std::string& name, fault_kind how) override;
  void record(job_event e) override;
  // Records an event stamped with the time it happened rather than now (a
  // progress event: the step was reached before its evaluation ran).
  void record_at(job_event e, std::chrono::steady_clock::time_point at);
  caf::error node_fault(uint32_t node, fault_kind how, std::chrono::milliseconds away) override;

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
  // A progress event at `step`, scoring the parameters the shards hold now.
  void report_progress(uint64_t step);
  // job_recovery.cpp
  // Rolls the whole tree back to the newest valid checkpoint, if the
  // rollback policy admits it; else the escalation.
  caf::error roll_back(const std::string& why);
  // Reads the newest valid checkpoint in the directory (recording what it
  // skipped as damaged) and makes it the state the next tree starts from.
  // Returns its step (0: none, start from scratch); sets restored_checkpoint.
  caf::expected<uint64_t> load_newest_checkpoint();
  // job_config::resume: the run starts from the newest valid checkpoint,
  // which must fit this job (shards, shapes); faults planned for the steps
  // before it are not injected again.
  caf::error resume_from_newest_checkpoint();

  // job.cpp: the wait loop's parts.
  void on_committed(const checkpoint_committed& c);
  void on_directory(const supervision::directory_update& u);
  void watch_window();
  std::chrono::milliseconds until_next(std::chrono::milliseconds cap) const;
  // Tells every worker the coordinator's window.
  void widen_window();
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

}  // namespace keel
