#pragma once
// Scoring a held-out set by slices on the job's workers, with the caller
// as the fallback. The set's examples are cut into slices of
// slice_examples; each live worker holds up to `in_flight` slices at once
// ((score_atom, slice_task) -> slice_score, actors/ps/worker.hpp) and gets
// the next as it answers. A worker that fails a slice, answers a score that
// does not fit it (actors/core/slice_wire.hpp) or does not answer within
// `deadline` gets no more; the slice goes to another live worker, and once
// no worker is left the caller scores what remains itself (`score_here`,
// one slice at a time): never a hang, each slice merged exactly once. The
// partial evaluations merge exactly in any order (partial_evaluation), so
// the result is the same, bit for bit, whoever scored which slice. `done`
// gets the evaluation of the whole set, or the first error of `score_here`
// (naming the slice); it runs on the caller's thread, as does everything
// here (a chain of continuations on `self`).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "models/model.hpp"

namespace keel {

// Examples a slice holds (the last may hold fewer).
constexpr uint64_t slice_examples = 4096;

struct slice_scorer {
  std::string name;  // "worker:1", for events and errors
  caf::actor handle;
};

using slice_done = std::function<void(caf::expected<partial_evaluation>)>;

struct slice_plan {
  uint64_t examples = 0;        // the held-out set: examples [0, examples)
  uint64_t slice_size = slice_examples;
  std::vector<float> dense;     // every dense key, sent with each slice
  std::vector<slice_scorer> workers;  // none: the caller scores every slice
  std::chrono::milliseconds deadline{10000};  // a worker's answer to one slice
  uint32_t in_flight = 2;       // slices a worker holds at once (>= 1)
  // Scores one slice here; calls its continuation exactly once, on the
  // caller's thread.
  std::function<void(test_slice, slice_done)> score_here;
  // A worker failed a slice, which goes to another (or here): why, naming
  // the worker and the slice. May be empty.
  std::function<void(const std::string&)> on_reassign;
  // A slice was merged, scored by this worker's name (or "" for the
  // caller). May be empty.
  std::function<void(const std::string&)> on_scored;
};

// The slices [0, examples) is cut into, in order.
std::vector<test_slice> cut_slices(uint64_t examples, uint64_t slice_size);

void dispatch_slices(caf::event_based_actor* self, slice_plan plan,
                     std::function<void(caf::expected<evaluation>)> done);

}  // namespace keel
