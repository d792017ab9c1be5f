#pragma once
// worker_core is the state and the rules of one data-parallel worker, without
// the actor around it: where the step loop stands (step, phase, generation,
// checkpoint window), the step's working set (which keys each shard serves,
// which shards have answered the pull or acknowledged the push, the pulled
// parameters), the replay log, and what a restart of a shard or of this
// worker calls for (a resume step, a replay, or a rollback). It decides; the
// worker actor (actors/ps/worker.cpp) performs: it computes batches and
// gradients with the model, sends the messages the core builds, and times
// retries. A plain value: deterministic, single-threaded, movable.
//
// Generations: every phase change that makes in-flight requests stale bumps
// the generation; a reply or retry carrying an older one is ignored.
//
// Backpressure: with a byte bound on the replay log (log_bound), a worker
// whose log holds more than the bound when it reaches a checkpoint step
// (a multiple of checkpoint_every; a checkpoint can only be taken there)
// does not start that step: it is paused until a checkpoint at or past the
// step commits. While paused, a commit truncates the log to all it covers
// (not only to the checkpoint before it, as otherwise: a shard restarted in
// the instant of that commit, from the checkpoint before, then costs a
// rollback instead of a replay), so the log empties. The log was within the
// bound at the checkpoint step before, so it never holds more than the bound
// plus one interval's pushes. Pausing only delays: a BSP run's result is the
// same. Without checkpoints (checkpoint_every 0) no commit would ever empty
// the log, so the bound is kept at each push instead: the oldest pushes
// (acknowledged by every shard) are dropped until the log is within it, and
// a shard restarted from the starting state after that cannot be replayed:
// the worker asks for a rollback, to step 0 (no checkpoint exists), which
// under BSP ends in the same result. (A worker restarted with its node loses
// its log anyway, so across node processes a node kill without checkpoints
// rolls back to step 0 whatever the other workers' logs hold.)

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/consistency.hpp"
#include "actors/core/hash_slots.hpp"
#include "actors/core/partition.hpp"
#include "actors/core/replay_log.hpp"
#include "actors/core/worker_report.hpp"
#include "messages/protocol.hpp"
#include "models/batch_schedule.hpp"
#include "models/model.hpp"

namespace keel {

enum class worker_phase {
  resolving,  // waiting until the directory names every shard
  resuming,   // asking every shard what it holds of this worker
  waiting,    // the checkpoint window, or backpressure (paused()), holds the next step back
  pulling,    // the step's pulls are out
  pushing,    // the step's pushes are out
  finished,   // every step done; stays up to replay to restarted shards
  halted,     // asked the job for a rollback; ignores everything
};

// The worker actor's configuration (actors/ps/worker.hpp) holds this one
// as its part; the three fields the model determines are filled in by
// spawn_worker from the model it is given, and do not cross processes.
struct worker_core_config {
  uint32_t worker = 0;
  uint32_t epoch = 0;                    // the job's tree generation
  std::vector<shard_keys> parts;         // key ranges, by shard index
  std::vector<std::string> shard_names;  // directory names, by shard index (for reasons)
  uint64_t total_steps = 0;              // global steps to run
  consistency_kind rule = consistency_kind::bsp;
  bool windowed = false;  // a step starts only below the job's window
  uint64_t checkpoint_every = 0;  // steps between checkpoints (0: none, no backpressure)
  uint64_t log_bound = 0;         // the replay log's byte bound (0: none); see Backpressure
  // Of the model:
  uint64_t dense_size = 0;  // the model's dense keys; sparse key k is dense_size + k
  uint64_t steps_per_epoch = 1;
  bool dense_only = false;  // the model has no sparse keys: every step pulls the same keys
  std::vector<uint32_t> table_dims;  // d of each of the model's embedding tables (none: no tables)
};

// The field order is the wire format; the model's fields stay out.
template <class I>
typename I::result_type inspect(I& f, worker_core_config& x) {
  return f(caf::meta::type_name("keel.worker_core_config"), x.worker, x.epoch, x.parts, x.shard_names,
           x.total_steps, x.rule, x.windowed, x.checkpoint_every, x.log_bound);
}

// A pull from `worker` to `shard` (at its fencing `epoch`) for step `clock`:
// the dense keys of `range` (none when empty), the sparse `keys`, and each
// table t's keys that `tables[t]` gives this shard (tables without any are
// left out). Worker steps, evaluation slices and row reads all build theirs here.
pull_request_msg make_pull_request(uint32_t worker, uint32_t shard, uint64_t epoch, uint64_t clock,
                                   key_range range, const std::vector<uint64_t>& keys,
                                   const std::vector<shard_split>& tables = {});

// Lays the table rows of `shard`'s reply to such a pull where their keys sat
// in the caller's lists (tables[t]'s positions: rows[t] holds dims[t] floats
// a key), so each list reads back in its own order. Errors name the shard
// and table: a block missing, of another dim or size, or one not asked for.
caf::error take_pulled_rows(uint32_t shard, schema::PullReply::Reader reply, const std::vector<shard_split>& tables,
                            const std::vector<uint32_t>& dims, std::vector<std::vector<float>>& rows);

class worker_core {
 public:
  explicit worker_core(worker_core_config cfg);
  worker_core() = default;

  const worker_core_config& config() const { return cfg_; }
  uint32_t num_shards() const { return static_cast<uint32_t>(cfg_.parts.size()); }
  worker_phase phase() const { return phase_; }
  uint64_t step() const { return step_; }  // the global step in progress
  uint64_t generation() const { return generation_; }
  uint64_t window() const { return window_; }
  // Held at a checkpoint step because the replay log is over its bound.
  bool paused() const { return paused_; }
  // Where the step in progress falls: (epoch, step within it).
  epoch_step position() const { return split_global_step(step_, cfg_.steps_per_epoch); }
  // In the current phase: has `shard` answered (resuming), been pulled
  // (pulling), acknowledged the step's push (pushing)?
  bool done(uint32_t shard) const { return done_.at(shard) != 0; }
  uint64_t max_acked(uint32_t shard) const { return max_acked_.at(shard); }
  const replay_log& log() const { return log_; }
  const worker_report& report() const { return report_; }

  // ---- Shards coming and going ------------------------------------------

  enum class shard_action { none, resume, ask_status, replay };
  // The directory names a new incarnation of `shard`. Once every shard is
  // known, resolving ends: `resume` (the core is now resuming; ask every
  // shard its status). While resuming, a restarted shard is asked again
  // (`ask_status`), and an answer its previous incarnation gave is dropped:
  // the new one may be restored from an older checkpoint. Otherwise a
  // restarted shard gets a `replay`. Nothing while halted.
  shard_action shard_up(uint32_t shard, uint64_t incarnation);

  // Fencing (actors/ps/parameter_shard.hpp): the epoch of `shard`'s current
  // incarnation, as its status reply names it (0: none known, or an
  // unfenced shard). Pushes and pulls name it from then on; the log's
  // pushes are readdressed to it when resent. An ack or pull reply of
  // another epoch, from an incarnation that has been replaced, is ignored.
  void set_shard_epoch(uint32_t shard, uint64_t epoch) { epoch_.at(shard) = epoch; }
  uint64_t shard_epoch(uint32_t shard) const { return epoch_.at(shard); }
  bool from_current(uint32_t shard, uint64_t epoch) const {
    return shard < epoch_.size() && (epoch_[shard] == 0 || epoch == epoch_[shard]);
  }
  // The job's slot map of the model's tables, as the step's pulls route
  // rows (null for a model without tables); a held-out slice's pulls
  // (actors/ps/worker_scoring.cpp) route the same way.
  const slot_map* table_slots() const { return slots_ ? &*slots_ : nullptr; }

  // What a restarted shard needs, given the last seq of this worker it
  // holds: the logged pushes after it, and the pull again when the step is
  // still waiting for it. When the shard lacks pushes the log no longer
  // holds, the core halts and `rollback` names why. Empty while halted.
  struct replay_plan {
    std::vector<push_msg> resend;
    bool pull_again = false;
    std::optional<std::string> rollback;  // set: halted; ask the job for a rollback, saying this
  };
  replay_plan replay(uint32_t shard, uint64_t received);

  // ---- Resume after a restart -------------------------------------------

  enum class resume_outcome { pending, start, rollback };
  // True while a status reply or failure for `gen` still matters.
  bool status_open(uint64_t gen) const;
  // `shard` holds pushes up to `received` of this worker (a reply to the
  // status request of generation `gen`; stale ones change nothing). When the
  // last shard has answered, the step becomes the first some shard lacks:
  // `start` it, or under BSP, when some shard is already past it, `rollback`
  // (halted; rollback_reason() says why).
  resume_outcome status_received(uint64_t gen, uint32_t shard, uint64_t received);
  // Why the core halted for a rollback (unset until it did).
  const std::optional<std::string>& rollback_reason() const { return rollback_reason_; }

  // ---- The step loop ----------------------------------------------------

  enum class step_start { finished, waiting, paused, pull };
  // May the step in progress start? `finished` after the last step (the
  // report is final), `waiting` while the window holds it back, `paused`
  // while the replay log is over its bound at a checkpoint step (until
  // release_backpressure() after a commit), else `pull`:
  // the caller computes the batch's keys and calls begin_pull. The caller
  // asks at once whenever a resume or a step completes.
  step_start next_step();
  // The job's window grew to `limit`; true when a waiting step may start now.
  bool widen_window(uint64_t limit);
  // The job changed its workers at runtime: this worker's last step is
  // steps - 1 (a change comes before any worker reaches its step).
  void end_at(uint64_t steps) { cfg_.total_steps = std::max(step_, std::min(cfg_.total_steps, steps)); }

  // Starts the step's pulls for the batch's sparse `model_keys` (model key
  // space, ascending) and, for a model with tables, the rows `table_keys`
  // names (one list per table, each ascending): a new generation, no shard
  // pulled yet. Each table's keys go to the shards the job's slot map
  // (default_slot_owners) gives them.
  void begin_pull(const std::vector<uint64_t>& model_keys, const table_key_lists& table_keys = {});
  // The global sparse keys `shard` must serve in this step.
  const std::vector<uint64_t>& keys_of(uint32_t shard) const { return shard_keys_.at(shard); }
  pull_request_msg pull_request(uint32_t shard) const;
  // A pull of the next step's parameters, asked for early: right after this
  // step's pushes, so that a BSP shard answers it as soon as the step is
  // applied instead of after the acks and another round trip. Only for a
  // dense model under BSP, whose next pull is known now (no sparse keys),
  // and only when the next step will run without waiting (not the last,
  // not held back by the window). Empty when the next step's pull cannot
  // be asked for now. Its reply counts once the next step pulls
  // (accepts_pull_reply); until then the caller keeps it.
  std::optional<pull_request_msg> early_pull_request(uint32_t shard) const;
  // True while the pull to `shard` of generation `gen` is unanswered.
  bool pull_open(uint64_t gen, uint32_t shard) const;
  // A pull reply that arrived outside its request (a duplicating link):
  // true when it answers the open pull of the current step.
  bool accepts_pull_reply(uint32_t shard, uint64_t clock) const;
  // Takes `shard`'s pull reply (the caller checked it is open). True when
  // every shard has answered. Fails, naming the shard, when the reply holds
  // keys outside the shard's range or the wrong number of sparse values.
  // A reply from a replaced incarnation (from_current) is ignored: false.
  caf::expected<bool> pulled(uint32_t shard, schema::PullReply::Reader reply);
  // The step's parameters, once every shard has answered.
  parameter_view parameters() const;

  // Builds, logs and returns the step's pushes (seq step + 1), one per
  // shard. A gradient that is not finite is not pushed: every shard gets an
  // empty push (keeping BSP moving) and `skipped` is set.
  struct push_round {
    bool skipped = false;
    std::vector<push_msg> pushes;  // by shard
  };
  push_round begin_push(const gradient_buffer& grad);
  // True while the push to `shard` of generation `gen` is unacknowledged.
  bool push_open(uint64_t gen, uint32_t shard) const;
  // The step's logged pushes to `shard` not yet acknowledged (for a retry).
  std::vector<push_msg> unacked(uint32_t shard) const;

  // What an ack calls for: nothing, the next step (the step is complete),
  // resending from the log (the shard misses earlier pushes), or a rollback
  // (halted; the log no longer holds what the shard needs).
  struct ack_outcome {
    bool step_complete = false;
    std::vector<push_msg> resend;
    std::optional<std::string> rollback;  // set: halted; ask the job for a rollback, saying this
  };
  // `shard` acknowledged `ack`. Acks are idempotent; ignored while halted,
  // for an unknown shard or from a replaced incarnation (from_current).
  // Fails when the shard rejected the push.
  caf::expected<ack_outcome> acked(uint32_t shard, schema::PushAck::Reader ack);
  // A committed checkpoint covers `shard`'s pushes up to seq `covered`. The
  // log drops what the checkpoint before it covered, not more: a shard
  // restarted while this one was being committed restores the one before
  // (the newest committed then) and needs the pushes since, which a log cut
  // at `covered` would have lost to a needless rollback. If one is the
  // step's push the shard counts as having acknowledged it. True when that
  // completes the step.
  bool checkpoint_committed(uint32_t shard, uint64_t covered);
  // After a commit: when paused and the commits cover every shard up to
  // the paused step, the pause ends: true, and the caller asks next_step()
  // again.
  bool release_backpressure();

  enum class retry_action { none, pull, status, push };
  // A retry timer of generation `gen` for `shard` fired: what to resend.
  retry_action retry(uint64_t gen, uint32_t shard, bool push) const;
  void count_retry() { ++report_.retries; }
  // A step the window held back for `us` microseconds could start.
  void waited_at_window(uint64_t us) { report_.window_wait_us += us; }

  // Stops everything (a rollback is due): a new generation, phase halted.
  void halt();

 private:
  void begin_phase(worker_phase p);
  bool step_pushed(uint32_t shard);
  // At a checkpoint step with the log over its bound and not yet covered.
  bool over_bound() const;
  // The push of `grad`'s slice to `shard` (none of it when `empty`);
  // `*finite` says whether its dense values were all finite.
  push_msg make_push(uint32_t shard, const gradient_buffer& grad, bool empty, bool* finite) const;
  size_t sparse_offset(uint32_t shard) const;
  caf::error pulled_tables(uint32_t shard, schema::PullReply::Reader reply);
  // Words the table blocks of the push to `shard` take in its message, so
  // the push is built in one segment of its size.
  size_t table_push_words(uint32_t shard) const;
  // Adds `shard`'s table blocks of `grad` to the push being built; false
  // when a gathered row is not finite.
  bool push_tables(uint32_t shard, const gradient_buffer& grad, schema::Push::Builder b,
                   frame_builder& fb) const;
  std::string halt_because(std::string why);

  worker_core_config cfg_;
  worker_phase phase_ = worker_phase::resolving;
  uint64_t step_ = 0;
  uint64_t window_ = 0;
  uint64_t generation_ = 0;
  std::vector<push_msg> addressed(uint32_t shard, std::vector<push_msg> pushes) const;
  std::vector<uint64_t> incarnation_;              // per shard; 0 until the directory names it
  std::vector<uint64_t> epoch_;                    // per shard: its fencing epoch, 0 until known
  std::vector<char> done_;                         // per shard, in the current phase
  size_t pending_ = 0;                             // shards not yet done
  std::vector<uint64_t> model_keys_;               // the step's sparse keys (model key space)
  std::vector<std::vector<uint64_t>> shard_keys_;  // global sparse keys, per shard
  std::vector<float> dense_;                       // pulled dense parameters (all dense keys)
  std::vector<float> sparse_values_;               // pulled sparse values, aligned with model_keys_
  std::optional<slot_map> slots_;                  // the tables' slot map (with tables only)
  table_key_lists table_keys_;                     // the step's rows, per table
  std::vector<shard_split> table_split_;           // per table: its keys by shard, reused
  std::vector<std::vector<float>> table_rows_;     // per table: pulled rows, aligned with table_keys_
  std::vector<table_rows> table_views_;            // per table: what parameters() shows
  replay_log log_{0};
  std::vector<uint64_t> max_acked_;    // per shard
  std::vector<uint64_t> resume_from_;  // per shard: what it held at resume
  std::vector<uint64_t> prev_cover_;   // per shard: the checkpoint before the last one's cover
  std::optional<std::string> rollback_reason_;
  bool paused_ = false;
  worker_report report_;
};

}  // namespace keel
