#pragma once
// Which workers take part in which steps: elastic workers (issue 21, item 4)
// as a plain value every shard and worker holds. A job has `slots` workers
// (worker:0 .. worker:slots-1); each is active over one range of steps
// [begin, end): from the start or the step it joins at, to the step it
// leaves at or the end of the run. Membership changes only at step
// boundaries, so every step has one set of active workers, which every
// shard and worker derives from the same schedule:
//  - a shard's BSP step waits for, and sums (in worker-id order), the pushes
//    of the workers active at that step; SSP's slowest worker is the
//    slowest active one; a push of a worker outside its range is refused;
//  - a worker pulls and pushes in its range only, and its batches are dealt
//    by its rank among the step's active workers (batch_at below).
// A run with the same schedule is the same run, bit for bit, wherever its
// actors are and however often they restart. The schedule without changes
// (every slot active throughout) is the static job of before, with the same
// batches.
//
// Text form (keel train --worker-changes): comma-separated items
// `join:worker:W@STEP` (worker W is inactive until STEP),
// `leave:worker:W@STEP` (W's last step is STEP - 1) and `reserve:worker:W`
// (W takes part in no step until a change at runtime lets it join); at
// most one of each per worker, a join before a leave.
//
// Changes at runtime (job::change_workers): changed() moves a reserved
// worker's join, or any active worker's leave, to a step no worker has
// started yet; from that step on it is the schedule every shard and worker
// holds, as if it had been planned. A reserved worker's span begins at
// reserve_step, far past any run's steps, which no seq or clock reaches:
// a shard that holds reserve_step for a worker knows it never pushed
// (shard_workers.cpp lowers it to the worker's join when it comes).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>

#include "models/batch_schedule.hpp"

namespace keel {

// Where a reserved worker's span begins (see above).
constexpr uint64_t reserve_step = uint64_t{1} << 62;

// One worker's active steps [begin, end).
struct worker_span {
  uint64_t begin = 0;
  uint64_t end = UINT64_MAX;
};

template <class I>
typename I::result_type inspect(I& f, worker_span& x) {
  return f(caf::meta::type_name("keel.worker_span"), x.begin, x.end);
}

class worker_schedule {
 public:
  // Every one of `slots` workers active throughout.
  explicit worker_schedule(uint32_t slots = 1) : slots_(slots) {}
  // From each worker's span (one per slot). Errors: invalid_argument when
  // a span is empty (begin >= end) or some step below `total_steps` has no
  // active worker; the text names the worker or step.
  static caf::expected<worker_schedule> make(std::vector<worker_span> spans, uint64_t total_steps);
  // The schedule `text` describes (see above) for `slots` workers over
  // `total_steps` steps. Errors name the item and what is wrong with it.
  static caf::expected<worker_schedule> parse(const std::string& text, uint32_t slots, uint64_t total_steps);

  uint32_t slots() const { return slots_; }
  // The schedule from step `at` on with `items` applied, comma-separated
  // `join:worker:W` (a reserved worker joins at `at`) and `leave:worker:W`
  // (an active or joining worker's last step is at - 1). Errors name the
  // item and why (not reserved, not active, no worker left at some step).
  caf::expected<worker_schedule> changed(const std::string& items, uint64_t at, uint64_t total_steps) const;

  // A schedule from elsewhere (a peer, a message) fit for a job of `slots`
  // workers: as many slots, one span per slot, none empty. The error names
  // what is wrong.
  caf::error check(uint32_t slots) const;

  // Whether any worker joins or leaves.
  bool elastic() const { return !spans_.empty(); }
  // Whether `worker` is held in reserve (see above).
  bool reserved(uint32_t worker) const { return span(worker).begin == reserve_step; }
  worker_span span(uint32_t worker) const { return spans_.empty() ? worker_span{} : spans_.at(worker); }
  bool active(uint32_t worker, uint64_t step) const;
  // How many workers step `step` has.
  uint32_t count(uint64_t step) const;
  // Worker-steps over steps [0, total): the pushes a worker makes to each shard, summed.
  uint64_t worker_steps(uint64_t total) const;
  // The step boundaries where the active set changes, ascending, without 0.
  std::vector<uint64_t> changes() const;
  // The text form (empty: no changes).
  std::string to_string() const;
  const std::vector<worker_span>& spans() const { return spans_; }

  // Where worker `worker`'s batch of step `step` lies: the steps since the
  // active set last changed form a pass of their own over the data (its
  // epochs counted from there), dealt among that set's workers by rank;
  // the first pass is the static schedule's, later ones permute with
  // their own seed. Valid for an active worker only.
  batch_position batch_at(uint64_t seed, uint32_t worker, uint64_t step, uint32_t batch_size,
                          uint64_t num_examples) const;

  template <class I>
  friend typename I::result_type inspect(I& f, worker_schedule& x) {
    return f(caf::meta::type_name("keel.worker_schedule"), x.slots_, x.spans_);
  }

 private:
  uint32_t slots_ = 1;
  std::vector<worker_span> spans_;  // one per slot; empty: every slot active throughout
};

}  // namespace keel
