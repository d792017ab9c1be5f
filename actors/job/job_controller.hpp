#pragma once
// The job controller: the actor that runs a keel::job, whether or not the
// application waits for it. job.cpp (the application's handle) spawns it
// and talks to it only through the requests below. Where the job's actors
// run in this process it is detached (a thread of its own, so the model's
// evaluation and the reading of checkpoints never take a scheduler thread
// from the actors that train); in a cluster's coordinator, which trains
// nothing, it is scheduled, since its handle goes to other nodes and a
// detached actor's that did blocks CAF 0.17's shutdown (upstream #1110). The controller starts the
// supervision tree, follows the workers' steps and the checkpoints (window,
// commit fan-out), injects the fault plan, rolls the tree back when local
// recovery is impossible, reads the parameters (mid-run on request, and at
// the end) and ends the run with an outcome it hands to the event_feed.
// Its handlers never wait for a message: what waits (a tree going down, a
// shard's answer, a name to come back) is a continuation. They block only on
// the disk (a rollback reading its checkpoint) and the model's evaluation;
// fault_config::node_faults runs on a thread of its own (job_faults.cpp). Not part of the
// public API.
//
// Its state is in owned parts, each with its contract: run_state (which tree
// runs, in which phase, how it got there), progress_state (how far the
// workers are, the checkpoint window with its storage deadline:
// checkpoint_window.hpp), readout_state (the result as it is assembled, and
// reads of the parameters). The functions that act on them
// are declared at the end, by the file that defines them; job_controller.cpp
// is the top: the behaviour and the run's phases.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/core/actor_id.hpp"
#include "actors/core/atoms.hpp"
#include "actors/core/partition.hpp"
#include "actors/core/replica_store.hpp"
#include "actors/core/shard_core.hpp"
#include "actors/core/table_snapshot.hpp"
#include "actors/core/worker_report.hpp"
#include "actors/core/worker_schedule.hpp"
#include "actors/faults/fault_driver.hpp"
#include "actors/job/checkpoint_window.hpp"
#include "actors/job/controller_core.hpp"
#include "actors/job/job.hpp"
#include "actors/job/placed_job.hpp"
#include "actors/job/rollback_policy.hpp"
#include "actors/ps/checkpointer.hpp"
#include "storage/run_identity.hpp"
#include "supervision/directory.hpp"
#include "supervision/supervisor.hpp"

namespace keel {

class event_feed;

// The requests job.cpp sends the controller; each is answered exactly once.
//   (begin_atom)               -> ok | error: resumes if asked, starts the first
//                                 tree; answered once it is up (or failed)
//   (stop_atom)                -> ok once the tree is down and its events are
//                                 recorded | errc::shutting_down (not running)
//   (params_atom)              -> job::parameters_now | error
//   (rows_atom, table, keys)   -> std::vector<float> | error (row_read.hpp)
//   (table_atom, table)        -> job::table_now | error (row_read.hpp)
//   (kill_atom, fault)         -> ok | error: ends fault.target by fault.kind
//   (inject_atom, fault)       -> ok | error: injects the fault now
//   (job_status_atom)          -> std::string: where the run stands
//   (workers_atom, items)      -> uint64_t: workers changed at runtime from that step (job_workers.cpp)
//   (worker_lost_atom, worker) -> uint64_t: the placement found no node for the worker (job_workers.cpp)
// While the tree restarts (a rollback) params, kill, inject and stop wait for
// it to run again; once the job has ended they fail with errc::shutting_down.
using begin_atom = caf::atom_constant<caf::atom("job_begin")>;
using stop_atom = caf::atom_constant<caf::atom("job_stop")>;
using kill_atom = caf::atom_constant<caf::atom("job_kill")>;
using inject_atom = caf::atom_constant<caf::atom("job_inject")>;
using job_status_atom = caf::atom_constant<caf::atom("job_status")>;
using rows_atom = caf::atom_constant<caf::atom("job_rows")>;
using table_atom = caf::atom_constant<caf::atom("job_table")>;
// The controller's own timers.
using job_tick_atom = caf::atom_constant<caf::atom("job_tick")>;      // a timed fault or window deadline
using reread_atom = caf::atom_constant<caf::atom("job_reread")>;      // read the final parameters again
using guard_atom = caf::atom_constant<caf::atom("job_guard")>;        // (transition): stop waiting for downs

// `run`: the run's identity (actors/job/job_identity.hpp), which its
// checkpoints carry and a rollback or resume checks.
caf::actor spawn_job_controller(caf::actor_system& sys, placed_job_config cfg, run_identity run,
                                std::shared_ptr<event_feed> feed);

// ---------------------------------------------------------------------------
// run_state: which supervision tree runs, in which phase, and how it came to
// be there (the first start, a resume, rollbacks). The phase and the epoch
// are the core's (controller_core.hpp), which decides what the controller
// does with a message: workers' reports count only for the current epoch,
// requests wait while the tree restarts, and nothing is recorded once the
// job has ended.
struct run_state {
  controller_core core;
  std::optional<supervision::tree> tree;  // the current tree (none while it is replaced or gone)
  bool root_down = false;                 // the current tree's root has gone down
  std::map<actor_id, caf::actor> handles;  // the directory's names, parsed -> its handle in the current tree
  std::vector<shard_keys> parts;
  std::vector<shard_config> shard_cfgs;
  std::vector<snapshot_ref> start_from;  // the checkpoint a tree starts from, by shard (empty: fresh)
  uint64_t restored_checkpoint = 0;   // its id (0: none)
  uint64_t resumed_step = 0;          // checkpoint_config::resume: the step the run resumed at
  run_identity identity;              // every checkpoint this run writes or restores is of it
  std::optional<rollback_policy> rollbacks;
  // A transition (rollback, drain) waiting for actors to be down: `then`
  // runs once `awaited` is empty, or when guard `transition` times out.
  std::set<caf::actor_addr> awaited;
  std::function<void()> then;
  uint64_t transition = 0;
  // checkpoint_config::peer_copy in one process: the replica every shard's
  // copies go to, and its store (invalid, null: none).
  caf::actor replica;
  std::shared_ptr<replica_store> replicas;
  std::vector<std::function<void()>> deferred;  // requests waiting for the tree to run
  // Workers no node could run, leaving at the step of the checkpoint the
  // rollback under way restores (training_config::min_workers).
  std::set<uint32_t> leaving;
  // The step the current tree starts from (a rollback's or a resume's
  // checkpoint; 0: the start): a worker that left by then is not started.
  uint64_t first_step = 0;
  caf::response_promise begun;                  // job::start's, until the first tree is up
  std::vector<caf::response_promise> stoppers;  // job::stop's, answered at the end
};

// progress_state: where the workers of the current epoch stand, and the
// checkpoint window they run in. Reset (but for the window and the
// progress points) whenever a tree starts.
struct progress_state {
  std::vector<uint64_t> worker_step;           // by worker: global steps completed
  std::set<uint32_t> done;                     // workers that finished their steps
  std::map<uint32_t, worker_report> reports;   // the last report of each worker
  std::optional<checkpoint_window> checkpoints;  // and the checkpoints' storage
  uint64_t last_progress = 0;                  // the step of the last progress event
  double loss_sum = 0;                         // training losses since that event
  uint64_t loss_count = 0;
  std::optional<std::chrono::steady_clock::time_point> tick_at;  // the job_tick scheduled
  // The last time a worker completed a step (or the tree came up): the
  // stall timeout counts from it.
  std::chrono::steady_clock::time_point last_step_at = std::chrono::steady_clock::now();

  std::set<uint32_t> joined_said, left_said;   // elastic workers whose join / leave the timeline has
  // A change of workers at runtime under way: the step it takes effect at,
  // where the window is held until every shard and worker has it.
  std::optional<uint64_t> change_at;
  uint64_t slowest() const;
};

// The job's worker schedule now, for the tree's start functions: a change
// at runtime replaces it, and every shard and worker started after it
// reads it. Thread-safe (the start functions run on supervisors' threads).
class workers_box {
 public:
  explicit workers_box(worker_schedule s) : s_(std::move(s)) {}
  worker_schedule get() const {
    std::lock_guard<std::mutex> guard(m_);
    return s_;
  }
  void set(worker_schedule s) {
    std::lock_guard<std::mutex> guard(m_);
    s_ = std::move(s);
  }

 private:
  mutable std::mutex m_;
  worker_schedule s_;
};

// The shards' parameters as one read found them.
struct parameters_read {
  std::vector<float> dense;
  std::vector<float> sparse;   // key k at k
  uint64_t pushes_applied = 0; // the shards' applied seqs, summed
  std::vector<uint64_t> applied_by_worker;  // the same, by worker
  std::vector<std::vector<uint64_t>> applied_seqs;  // [shard][worker]: each shard's applied seqs
  bool complete = true;        // every shard has applied every worker's last push
  std::vector<table_digest> table_digests;  // each shard's tables' content_sha256, shard by shard
  std::vector<table_counters> table_counts; // by table, summed over the shards
};

// readout_state: the result as the run assembles it (counters and the
// timeline as they happen, the parameters and their quality at the end), and
// the progress events that wait for a read of the parameters. Those are
// scored one at a time, in order. While one waits, the events that follow
// it wait behind it, no planned fault fires and the final read does not
// start, so the timeline stays in the order things happened and a score
// reads the parameters of its step, not of a fault after it.
struct readout_state {
  struct timed_event {
    job_event event;
    std::chrono::steady_clock::time_point at;  // when it happened (a progress event: its step)
  };
  job_result result;
  std::deque<timed_event> scoring;  // progress events; the head is being read
  std::deque<timed_event> held;     // events that came after the head, or during a node fault
  // One per node fault being carried out, in the order they started: where
  // in `held` the events that came after its start begin. Its own event,
  // recorded when it completes, goes there, ahead of them (a node's loss
  // follows the kill that caused it).
  std::deque<size_t> node_fault_marks;
  bool final_reading = false;       // the final read is in flight
  // When the end of the run began waiting for its last checkpoint.
  std::optional<std::chrono::steady_clock::time_point> final_checkpoint_since;
  std::chrono::steady_clock::time_point evaluating_since;  // the end of the run's scoring began
};

// job_shards.cpp: what each shard is configured with.
// Shard i's configuration, its keys `parts[i]`, with its part of the
// update rules by parameter (training_config::rules).
std::vector<shard_config> shard_configs(const placed_job_config& c, const std::vector<shard_keys>& parts);
// The rule that updates parameter `name`, else the job's optimizer.
const optimizer_config& rule_of(const training_config& t, const std::string& name);
// The rules name the layout's tensors and tables; custom rules are whole
// and stay in this process (no placement). Errors name the rule.
caf::error check_job_rules(const placed_job_config& c);

struct controller_state;
using controller_actor = caf::stateful_actor<controller_state>;

// The fault driver's hooks into the running tree (job_faults.cpp).
struct controller_hooks final : fault_hooks {
  controller_actor* self = nullptr;
  void end_actor(const std::string& name, fault_kind how,
                 std::function<void(caf::error)> done) override;
  void record(job_event e) override;
  void node_fault(uint32_t node, fault_kind how, std::chrono::milliseconds away,
                  std::function<void(caf::error)> done) override;
};

struct controller_state {
  placed_job_config cfg;
  std::shared_ptr<event_feed> feed;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  run_state run;
  progress_state progress;
  readout_state readout;
  controller_hooks hooks;
  // recovery_config::stall_timeout as stall_timeout_for() resolves it (0: none).
  std::chrono::milliseconds stall_timeout{0};
  std::optional<fault_driver> faults;
  caf::actor node_fault_runner;  // runs fault_config::node_faults, on a thread of its own
  // The last fencing epoch handed to a shard incarnation: every start of any
  // shard, in any tree of this run, takes the next one (parameter_shard.hpp).
  std::shared_ptr<std::atomic<uint64_t>> shard_epochs = std::make_shared<std::atomic<uint64_t>>(0);
  std::shared_ptr<workers_box> workers_now;  // cfg.training.schedule, for the start functions
  // Workers were changed at runtime: every shard and worker that comes up is
  // told the schedule (its start may have read the one before).
  bool workers_changed = false;
  static inline const char* name = "keel.job_controller";
};

// job_controller.cpp: the run's phases and what follows each message.
void record(controller_actor* self, job_event e);
// Records an event stamped with the time it happened rather than now (a
// progress event: the step was reached before its evaluation ran). While a
// progress event waits for its score, the event waits behind it.
void record_at(controller_actor* self, job_event e, std::chrono::steady_clock::time_point at);
// Appends an event to the timeline and hands it to the event feed.
void append_event(controller_actor* self, job_event e, std::chrono::steady_clock::time_point at);
// Appends the held events that happened before the next waiting progress
// event (all of them when none waits).
void release_held(controller_actor* self);
int64_t elapsed_ms(const controller_state& st);
// The tree is up: requests held for it run, the run goes on.
void tree_up(controller_actor* self);
// What follows every message while the tree runs: the faults that came due
// strike (unless a progress event waits for its score), the window is
// watched, the next deadline is scheduled.
void follow_up(controller_actor* self);
// A request that needs a running tree: while the tree is (re)started it is
// held (`again` runs once the tree is up, or the job has ended).
bool held(controller_actor* self, std::function<void()> again);
// A request the running tree serves (controller_core::request): true when
// it runs now; else it is held (`again`) or refused (answered on `rp`).
bool admitted(controller_actor* self, caf::response_promise& rp, std::function<void()> again);
// What a request gets once the job is not running (errc::shutting_down).
caf::error not_running();
// Ends the job with `outcome` (a failure, or the result); stops what runs.
void end_job(controller_actor* self, caf::expected<job_result> outcome);
// Runs `then` once every actor in `who` is down (each monitored by the
// caller), or after `guard` at the latest.
void after_downs(controller_actor* self, std::vector<caf::actor_addr> who, caf::timespan guard,
                 std::function<void()> then);

// job_tree.cpp: the supervision tree, started and stopped without waiting.
// Launches a tree from the run's start_from; tree_up() once it is up, the
// job fails if it cannot start.
void launch_tree(controller_actor* self);
// The tree goes down (every actor, in reverse start order); then every
// event its actors sent before they stopped is recorded (the event stream
// stops after forwarding them), so the timeline is complete; then `then`.
void stop_tree_and_drain(controller_actor* self, std::function<void()> then);
void on_directory(controller_actor* self, const supervision::directory_update& u);
// A commit's fan-out: the window moves, workers may truncate their logs.
void on_committed(controller_actor* self, const checkpoint_committed& c);
// Every worker waits at the window and no checkpoint has moved it for
// checkpoints.timeout: the awaited checkpoint is given up.
void watch_window(controller_actor* self);
void widen_window(controller_actor* self);
std::string progress_text(const controller_state& st);
// Elastic workers: the timeline's membership event when worker `w` first
// reports a step after joining, or is done before the run's end (it left).
void say_worker_change(controller_actor* self, uint32_t w, uint64_t step, bool done);

// job_workers.cpp: workers changed at runtime (job::change_workers).
// The file in the checkpoint directory that holds the schedule a change at
// runtime made (worker_schedule's text form), read back by a resume.
constexpr const char* worker_changes_file = "worker-changes";
caf::error write_worker_changes(const std::filesystem::path& dir, const worker_schedule& workers);
// The schedule `dir` holds for a job of `slots` workers and `steps` steps
// (none: no change was made at runtime). Errors name the file.
caf::expected<std::optional<worker_schedule>> read_worker_changes(const std::filesystem::path& dir, uint32_t slots,
                                                                  uint64_t steps);
void change_workers_request(controller_actor* self, const std::string& items, caf::response_promise rp);
// (worker_lost_atom, W) from the placement: no node could run worker W for
// --node-wait-ms. With a minimum of workers that allows it, W leaves:
// answered at once (0), then the job rolls back and W leaves at the
// restored checkpoint's step; otherwise an error says why not.
void lost_worker_request(controller_actor* self, uint32_t worker, caf::response_promise rp);
// A rollback's checkpoint at `step` is read: the leaving workers leave
// there (the schedule recorded as a change at runtime is). Errors end the job.
caf::error apply_leaving(controller_actor* self, uint64_t step);

// job_storage.cpp: the checkpoint window's decisions carried out.
// A checkpoint failed: the window moves past it; the event reaches the
// timeline summarised; a write failure may start the storage deadline.
void on_checkpoint_failed(controller_actor* self, job_event e);
// A checkpoint committed: a series of failures ends (its total is
// recorded), the deadline is off. True when the workers' window moved.
bool window_committed(controller_actor* self, const checkpoint_committed& c);
// Fails the job when the storage deadline has passed.
void watch_storage(controller_actor* self);

// job_recovery.cpp: whole-tree recovery.
// Rolls the tree back to the newest valid checkpoint if the rollback policy
// admits it (else the job fails with the escalation): the old tree goes
// down, its checkpointer with it, before the checkpoint is read.
void roll_back(controller_actor* self, const std::string& why);
// checkpoint_config::resume: the run starts from the newest valid checkpoint,
// which must fit this job (shards, shapes); faults planned for the steps
// before it are not injected again.
caf::error resume_from_newest_checkpoint(controller_actor* self);

// job_result.cpp: reading the parameters, progress, the result.
// Reads every shard's parameters. The final read (`final_read`) stops at the
// first shard that lacks a push or is restarting (complete = false); a
// mid-run read reads every shard whatever it holds and fails (not_found)
// while one is restarting. `done` runs on the controller's thread.
void read_parameters(controller_actor* self, bool final_read,
                     std::function<void(caf::expected<parameters_read>)> done);
// A progress event at `step`, scoring the parameters the shards hold then
// when progress_config::accuracy asks for it.
void report_progress(controller_actor* self, uint64_t step);
// Once every worker is done (and no progress event waits for its score):
// reads the shards until they are complete, then finishes the result.
void maybe_finish(controller_actor* self);

// job_requests.cpp: the application's requests, held while the tree is
// (re)started (job.hpp says what each answers).
void stop_now(controller_actor* self, caf::response_promise rp);
void read_now(controller_actor* self, caf::response_promise rp);
// job::rows (with `keys`) and job::table (without).
void table_request(controller_actor* self, std::string table, std::optional<std::vector<uint64_t>> keys,
                   caf::response_promise rp);
void kill_request(controller_actor* self, const fault& f, caf::response_promise rp);
void move_request(controller_actor* self, const std::string& name, const std::string& why,
                  caf::response_promise rp);
void inject_request(controller_actor* self, const fault& f, caf::response_promise rp);

// job_faults.cpp: job::kill and job::inject.
void kill_now(controller_actor* self, const fault& f, caf::response_promise rp);
void inject_now(controller_actor* self, const fault& f, caf::response_promise rp);
// A placement's move: stops shard or worker `name` with errc::moved (`why`),
// so that its supervisor restarts it where the placement now says. Answers
// the step a checkpoint must reach before the move has settled (0: none).
void move_now(controller_actor* self, const std::string& name, const std::string& why,
              caf::response_promise rp);

}  // namespace keel

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::fault)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::job::parameters_now)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::job::table_now)
