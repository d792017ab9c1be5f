#pragma once
// A job is one training run of keel's parameter server inside the calling
// process: an actor system, a supervision tree (root over a checkpointer, a
// shard supervisor and a worker supervisor), and a controller that runs the
// job. `start` validates the configuration (its numbers against
// config_bounds.hpp first, naming the field it refuses), starts the tree and
// returns once it is up. From then on the job runs on its own, whether or
// not anyone waits: the controller (an actor on a thread of its own)
// follows the workers' steps, moves the checkpoint window as checkpoints commit,
// injects the fault plan, rolls the tree back when local recovery is
// impossible, and at the end reads the parameters and stops the tree.
// `wait` only waits for that outcome: the result (the trained parameters'
// quality and hash, what was pushed and applied, the timeline of faults and
// recoveries) or the run's failure. Failures are values: a bad
// configuration, a tree that gives up (the error names the child that
// exhausted its restart intensity), or a timeout. Every member may be
// called from any thread, on_event callbacks included (but for `wait` and
// the destructor there); a call that needs the controller is a request to
// it and waits for its answer.

#include <chrono>
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/core/chain_options.hpp"
#include "actors/core/consistency.hpp"
#include "actors/core/job_event.hpp"
#include "actors/core/optimizer.hpp"
#include "actors/core/table_limits.hpp"
#include "actors/core/worker_schedule.hpp"
#include "actors/faults/fault_plan.hpp"
#include "actors/job/config_bounds.hpp"
#include "models/model.hpp"

namespace keel {

// What decides the trained parameters: with the same model and training
// configuration, BSP runs end bit-identical (same params_sha256) whatever
// the faults, the placement or the number of scheduler threads.
struct training_config {
  uint32_t shards = 2;
  uint32_t workers = 2;
  consistency rule;                              // default BSP
  optimizer_config optimizer;
  // How a step's gradients from the workers combine (optimizer_config.hpp):
  // sum (the default), or mean, under which a BSP step of W workers of
  // batch B is one step of batch W x B, as a single trainer takes it. The
  // job gives each shard optimizer.gradient_scale as it is, or divided by
  // the number of workers.
  gradient_combine combine = gradient_combine::sum;
  uint32_t batch_size = 32;
  uint64_t steps = 100;                          // global steps each worker runs
  // Elastic workers (actors/core/worker_schedule.hpp): which of the
  // `workers` take part in which steps, workers joining and leaving at step
  // boundaries, each step's batches dealt among that step's workers (a run
  // with the same schedule is the same run, bit for bit). Its slots must be
  // `workers`; without changes (the default) every worker runs every step.
  // Under `combine` mean a step's gradients are divided by that step's
  // workers. keel train --worker-changes join:worker:W@STEP,leave:worker:W@STEP.
  worker_schedule schedule{0};
  // The fewest workers the job may go on with (as torchrun's --nnodes
  // MIN:MAX; keel cluster --workers MIN:MAX), 0: `workers` always. A worker
  // no node can run (its placement waited --node-wait-ms for a node, a free
  // worker slot or its client) then leaves instead of failing the job: the
  // job rolls back to its newest checkpoint and the worker leaves at that
  // checkpoint's step (job_workers.cpp), while at least `min_workers` stay.
  // Needs checkpoints. Not part of the run's identity: a run that shrank is
  // the run with that leave planned (--worker-changes), bit for bit.
  uint32_t min_workers = 0;
  uint64_t seed = 1;
  // Update rules by parameter: a dense tensor's or an embedding table's name
  // (of the model's layout) to the rule that updates it instead of
  // `optimizer`, with hyperparameters of its own; or an application's own
  // rule (kind custom with a custom_update_rule, actors/core/optimizer_config.hpp:
  // only in a job in the application's process, not keel cluster). `combine`
  // scales each as it scales `optimizer`. `optimizer` itself may be custom.
  std::map<std::string, optimizer_config> rules;
  // Bounds on every embedding table of every shard (a model with tables):
  // capacity with eviction, admission filter. Counted in job_result::tables.
  table_limits tables;
  // What the model was built from beyond its name and layout (keel train:
  // its model_options, e.g. "mnist train 0 test 0"), as text. With the
  // fields above, the model's name and layout, it is the run's
  // configuration, whose hash every checkpoint carries: a resume of another
  // configuration is refused, naming the field.
  std::string model_options;
};

// Where and how often the run is made durable.
struct checkpoint_config {
  std::filesystem::path dir;                     // required; created if missing
  // Continue the run whose checkpoints are in `dir` (its process died) from
  // the newest valid one, instead of starting afresh. The rest of the
  // configuration must be that run's: a BSP run then ends bit-identical to
  // one never interrupted. Without it, a directory holding checkpoints is
  // refused.
  bool resume = false;
  // BSP steps between checkpoints; 0: none. Workers keep their pushes since
  // the checkpoint before the last one, to replay to a restarted shard; with
  // none they keep every push of the run (its gradients: memory grows with
  // steps x model size).
  uint64_t every = 50;
  size_t keep = 3;                               // committed checkpoints kept on disk
  // A checkpoint still missing a shard's snapshot this long after the first
  // one arrived is given up (reported as checkpoint_failed).
  std::chrono::milliseconds timeout{5000};
  // Each worker's replay log holds at most this many bytes of pushes plus
  // one interval's (`every` steps): a worker over it at a checkpoint step
  // pauses there (a backpressure event) until a checkpoint at that step
  // commits (a resumed event). 0: replay_log_bound's default, a quarter of
  // this machine's physical memory shared by the workers. Pausing only
  // delays: a BSP run's result is the same. Without checkpoints (every 0)
  // each log keeps at most this many bytes, dropping its oldest pushes, and
  // a shard restarted after a drop costs a rollback to step 0 (worker_core's
  // Backpressure).
  uint64_t max_log_bytes = 0;
  // A checkpoint whose write failed is written again (the same snapshots),
  // after retry_min, doubling up to retry_max, until it or a newer one
  // commits.
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5000};
  // Checkpoint writes failing for this long since the first failure after
  // the last commit (storage broken: a full disk, a read-only directory)
  // fail the job, naming the last failure and the last good checkpoint,
  // which stays intact for a resume.
  std::chrono::milliseconds storage_deadline{60000};
  // Incremental checkpoints: each shard writes a full base at least every
  // `full_every` checkpoints and between them a delta of what changed
  // since its previous one, while the chain's deltas stay within
  // `delta_fraction` of the base's bytes (actors/core/chain_options.hpp).
  // full_every 1: every checkpoint is full.
  chain_options incremental;
  // Peer copies (Gemini, SOSP'23; actors/ps/snapshot_replica.hpp): each
  // shard also sends every file it writes to a replica that keeps its newest
  // chain in memory, and a restarted shard reads its chain from there first
  // (every byte checked), the directory serving whatever the copy misses.
  // In one process, one replica in the job's process; in a cluster the
  // placement's own setting (cluster_placement_config::peer_copy: the
  // replica of the shard's peer node) decides, and keel cluster sets both
  // (off unless --peer-copy: see README, "Peer copies", for why).
  bool peer_copy = false;
  // A shard whose snapshot is at least this many bytes streams it into its
  // file as it encodes it, never holding it whole in memory, so a node's
  // memory stays that of its parameters (actors/core/shard_stream.hpp).
  // Such a checkpoint, if its write fails, is written again (as a base)
  // only if the shard has not changed since (its workers wait at that
  // checkpoint step: backpressure); else it is lost for that shard, whose
  // next checkpoint is a base. Smaller snapshots are built in memory, kept
  // until written and written again after any failure. With peer copies
  // every snapshot is built in memory (the copy is that memory). 0 (the
  // default): every snapshot streams; UINT64_MAX: none.
  uint64_t stream_above_bytes = 0;
};

// The replay log bound each worker gets: cfg.max_log_bytes, or when 0 a
// quarter of this machine's physical memory (sysconf) over `workers`.
uint64_t replay_log_bound(const checkpoint_config& cfg, uint32_t workers);

// How failures are detected and how much restarting is tolerated.
struct recovery_config {
  int max_restarts = 20;                         // per supervisor, within restart_period
  std::chrono::milliseconds restart_period{10000};
  // A pull or push unanswered this long is sent again (a shard that
  // restarted answers its next incarnation's way).
  std::chrono::milliseconds request_timeout{2000};
  // A running job whose workers complete no step for this long fails,
  // naming the workers it waits for and where they stand: every wait ends
  // in a decision, even one no other bound covers (a worker that can no
  // longer reach its shards, a client loop that stopped asking). 0 (the
  // default): stall_timeout_for() derives it; an application's own loop in
  // the job's process (job_config::application_loop without a cluster) has
  // none then, since that loop sets its own pace.
  std::chrono::milliseconds stall_timeout{0};
};

// The stall timeout a job of `cfg` runs with (recovery_config::stall_timeout
// when set): the longest a start may wait for a node, a worker slot or a
// client (`longest_placement_wait`: keel cluster's --node-wait-ms; 0 in one
// process), plus the storage deadline, plus ten request timeouts. None (0)
// for an application's own loops in the job's process.
struct job_config;
std::chrono::milliseconds stall_timeout_for(const job_config& cfg, std::chrono::milliseconds longest_placement_wait,
                                            bool loops_in_clients);

// Faults injected on purpose (actors/faults/fault_plan.hpp).
struct fault_config {
  std::vector<fault> plan;                       // kill_at for kills
  // Who carries out node faults (kill9, stop, cut on node:N): the owner of
  // the node processes (keel cluster). Null: node faults are refused. Called
  // on a thread of its own, one fault at a time in the plan's order; it may
  // block.
  std::function<caf::error(uint32_t node, fault_kind how, std::chrono::milliseconds away)> node_faults;
};

// What the run reports while it trains.
struct progress_config {
  uint64_t every = 0;                            // a "progress" event every N steps; 0: none
  bool accuracy = false;                         // progress events score the held-out set too
};

// Who scores the held-out set of a model with embedding tables
// (model::evaluates_slices), at the end of the run and at scored progress
// points: the workers, slice by slice, each pulling only the rows its
// slices need (a worker that fails or does not answer a slice within
// `slice_deadline` loses it to another, and with none left the coordinator
// scores the rest), or, with `on_workers` off, the coordinator alone. The
// evaluation is the same bit for bit either way.
struct evaluation_config {
  bool on_workers = true;
  std::chrono::milliseconds slice_deadline{10000};
};

struct job_config {
  std::shared_ptr<const model> training_model;  // required
  training_config training;
  checkpoint_config checkpoints;
  recovery_config recovery;
  fault_config faults;
  progress_config progress;
  evaluation_config evaluation;
  size_t scheduler_threads = 2;                  // CAF's worker threads for the job's actors
  // The application runs each worker's training loop itself, through a
  // ps_client (actors/job/ps_client.hpp, job::client): the keys it pulls
  // and the gradient it pushes are its own, and the model only gives the
  // layout, the initial values and the final evaluation. Everything else
  // is a worker's as usual: exactly-once pushes through shard restarts,
  // the consistency rule, checkpoints, rollbacks. Without an elastic
  // schedule. With a cluster placement, the loops run in client processes
  // (keel::cluster_client, actors/cluster/cluster_client.hpp), and the
  // placement must say so (child_placement::application_loops).
  bool application_loop = false;
};

// One embedding table at the end of a run, summed over the shards that hold
// its rows (read where they live; no rows travel).
struct table_stats {
  std::string name;
  uint32_t dim = 0;
  uint64_t rows = 0;
  uint64_t evictions = 0;           // rows evicted to make room (training.tables.capacity_rows)
  uint64_t admissions_refused = 0;  // pushed rows dropped by the admission filter
  uint64_t full_refused = 0;        // pushed rows dropped: a shard's table full of the push's own rows
  uint64_t bytes = 0;               // memory the shards' tables hold for it
  uint64_t parameter_bytes = 0;     // rows x dim x (1 + optimizer slots) x 4: values and optimizer state
};

struct job_result {
  evaluation quality;                            // on the model's held-out set
  uint64_t steps = 0;                            // global steps each worker completed
  uint64_t pushes_acked = 0;                     // distinct (worker, shard, seq) acknowledged
  // The same by shard. Equal at every shard unless a worker left for good
  // in the middle of an SSP or ASP step: its pushes of that step stay at
  // the shards that had acknowledged them (job_workers.cpp).
  std::vector<uint64_t> pushes_acked_by_shard;
  uint64_t pushes_applied = 0;                   // the shards' applied seqs, summed
  std::map<std::string, uint64_t> restarts;      // per actor name
  uint64_t rollbacks = 0;
  uint64_t checkpoints = 0;                      // committed during the run
  // What the checkpoints cost (their share of `seconds` is the figure to
  // watch): writing them (wall and the checkpointer thread's CPU, summed
  // over commits), and steps the checkpoint window held back (summed over
  // workers, each worker's last incarnation).
  double checkpoint_write_seconds = 0;
  double checkpoint_write_cpu_seconds = 0;
  double window_wait_seconds = 0;
  // The most bytes each worker's replay log held at once (its last
  // incarnation), by worker; checkpoint_config::max_log_bytes bounds it.
  std::vector<uint64_t> peak_log_bytes;
  std::vector<job_event> events;
  std::string params_sha256;                     // of dense then sparse values, in key order, then the tables' digests
  std::string fault_plan;                        // the faults injected, as parse_fault_plan reads them
  // The worker schedule the run ended with (worker_schedule's text form,
  // changes at runtime included; empty: every worker throughout).
  std::string worker_changes;
  // The planned faults that did not take effect ("FAULT: why"): they never
  // came due before the run ended, or their injection failed. Each is also
  // a fault event on the timeline.
  std::vector<std::string> faults_not_injected;
  uint64_t faults_injected = 0;                  // the planned faults that took effect
  message_fault_hits messages_hit;                    // by the plan's message faults
  std::vector<float> dense;                      // final dense parameters
  std::vector<float> sparse;                     // final sparse parameters (key k at k)
  std::vector<table_stats> tables;               // the model's embedding tables, in layout order
  double seconds = 0;                            // this process's share of the run, to the final
                                                 // parameters read (the evaluation not counted)
  double samples_per_second = 0;                 // over the steps this process ran
  double evaluation_seconds = 0;                 // scoring the held-out set at the end of the run
  // Held-out slices each scorer scored ("worker:0", ..., "job" for the
  // coordinator), over every evaluation of the run (evaluation_config).
  std::map<std::string, uint64_t> slices_scored;
  uint64_t resumed_at_step = 0;                  // checkpoint_config::resume: the checkpoint's step (0: fresh)
  // The run's id (random at a fresh start, kept across resumes), which
  // every checkpoint it wrote carries, and its configuration's hash.
  std::string run_id;
  std::string config_hash;
};

struct placed_job_config;  // not public: keel_cluster's jobs (actors/job/placed_job.hpp)
class ps_client;           // actors/job/ps_client.hpp

class job {
 public:
  static caf::expected<std::unique_ptr<job>> start(job_config cfg);

  // The parameters as the shards hold them now (dense, then sparse key k at
  // k), read while the job runs. Fails with errc::not_found while a shard
  // restarts, errc::shutting_down once the run has ended.
  struct parameters_now {
    std::vector<float> dense;
    std::vector<float> sparse;
  };
  caf::expected<parameters_now> parameters();

  // The rows of embedding table `table` (a name of the model's layout) for
  // `keys`, in the order asked: keys.size() x dim floats, a key without a
  // row reading its initial value. Read from the shards that own the keys
  // while the job runs; only these rows travel. Errors as parameters(), and
  // not_found naming a table the model does not have.
  caf::expected<std::vector<float>> rows(const std::string& table, const std::vector<uint64_t>& keys);

  // Every row of embedding table `name`, keys ascending: this gathers the
  // whole table into the calling process, for an application that asks for
  // it (no part of a run does). Errors as rows().
  struct table_now {
    uint32_t dim = 0;
    std::vector<uint64_t> keys;
    std::vector<float> values;  // keys.size() x dim
  };
  caf::expected<table_now> table(const std::string& name);

  // Stops the run: every actor in reverse start order. Returns once they are
  // down and the events they sent are recorded (each delivered to on_event
  // before `wait` returns). `wait` then returns errc::shutting_down. Fails
  // with errc::shutting_down when the run has ended already. The destructor
  // stops a running job too.
  caf::error stop();

  // Calls `f` for every event of the run, in the order they happened, one at
  // a time, on the job's event thread: never the controller's, never the
  // thread in `wait`. So `f` may block (that holds back later callbacks, not
  // the training) and may call kill, inject, parameters and stop. Events
  // from before the call are delivered first: `f` sees the run from its
  // first event. Without a callback, events are held for one until `wait`
  // is called, and then only kept in the result. No call of `f` starts
  // after `wait` has returned the outcome or once the destructor has begun;
  // what `f` uses must outlive the job (declare it before the job).
  void on_event(std::function<void(const job_event&)> f);

  // Waits up to `timeout` for the run's outcome: its result, its failure, or
  // errc::shutting_down after stop(). Every on_event callback for an event
  // before the outcome has returned by then. If the run has not ended,
  // returns errc::timeout saying where it stands; the run goes on, and
  // `wait` may be called again. Refused (errc::invalid_argument) from an
  // on_event callback, whose return the outcome waits for. An exception
  // thrown by a callback is rethrown here (and no callback runs after it).
  caf::expected<job_result> wait(std::chrono::milliseconds timeout);

  // How kill() ends an actor: CAF's unconditional kill, a quit with an error
  // (what a crash reason looks like), or an exception thrown from one of its
  // handlers (shards, workers and the checkpointer only).
  enum class kill_mode { kill, exit, raise };

  // Kills the actor with this name now: shard:N, worker:N, checkpointer, or
  // the supervisors root, shards and workers. While the actor restarts, waits
  // (up to 5 s) for its next incarnation; fails with errc::not_found naming
  // it when there is none.
  caf::error kill(const std::string& name, kill_mode mode = kill_mode::kill);

  // With job_config::application_loop: the client that runs worker
  // `worker`'s loop (one per worker; the same one on every call). Fails
  // with invalid_argument when the job runs its model's own loop, and
  // not_found for a worker the job does not have.
  caf::expected<ps_client> client(uint32_t worker);

  // Changes the job's workers while it runs: `items` are comma-separated
  // `join:worker:W` (a worker the schedule holds in reserve,
  // reserve:worker:W in training_config::schedule, joins) and
  // `leave:worker:W` (a worker leaves). They take effect together at the
  // first step no worker may have started yet, the checkpoint window's edge,
  // which is returned once every shard and worker has the new schedule; a
  // run with the same changes planned at that step from the start is the
  // same run, bit for bit. The change is recorded in the checkpoint
  // directory, and a resume of the run keeps it. Errors
  // (invalid_argument) name an item that cannot be (a worker not in
  // reserve, one that left already, no worker left at some step), a job
  // without checkpoints (no window), or a change under way.
  caf::expected<uint64_t> change_workers(const std::string& items);

  // Injects one fault now, whatever its trigger says (parse_fault_plan
  // reads the text form); callable like kill. Errors name a target the job
  // does not have.
  caf::error inject(const fault& f);

  ~job();
  job(const job&) = delete;
  job& operator=(const job&) = delete;

  // Opaque: defined in actors/job/job.cpp.
  struct impl;

 private:
  friend caf::expected<std::unique_ptr<job>> start_job(placed_job_config cfg);  // keel_cluster's start

  explicit job(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// The hex SHA-256 of the parameters, dense then sparse, as little-endian
// float32 in key order: the fingerprint BSP runs compare.
std::string params_sha256(const std::vector<float>& dense, const std::vector<float>& sparse);

// For a model with embedding tables: the hex SHA-256 of the 32-byte digest
// above followed by `table_digests`, each table's content_sha256
// (actors/core/table_snapshot.hpp) computed on the shard holding its rows,
// shard by shard and table by table in layout order (combine_digests). No
// process gathers the rows for it; two runs agree iff every shard holds the
// same rows bit for bit (with the same slot map).
std::string params_sha256(const std::vector<float>& dense, const std::vector<float>& sparse,
                          const std::vector<std::array<unsigned char, 32>>& table_digests);

}  // namespace keel
