#pragma once
// Scoring a model with embedding tables (model::evaluates_slices) without
// gathering its rows: the held-out set is cut into slices of
// slice_examples; for each, the coordinator asks every shard for the rows
// the slice needs (a PullRequest of table keys only, at clock 0, which
// every consistency rule serves at once; the rows come back in the order
// asked), lays them out for the model, scores the slice and merges the
// partial results (partial_evaluation: exact, in any order). At most one
// slice's rows are held at a time, so the coordinator's memory does not
// grow with the model. Runs on the controller's thread as a chain of
// continuations; `done` gets the evaluation of the whole set, or the first
// error (a shard that is not up or does not answer, a reply that does not
// fit the request, a model error), naming the shard or the slice.

#include <cstdint>
#include <functional>
#include <vector>

#include <caf/expected.hpp>

#include "actors/job/job_controller.hpp"
#include "models/evaluation.hpp"

namespace keel {

// Examples a slice holds (the last may hold fewer).
constexpr uint64_t slice_examples = 4096;

// Scores the training model on its held-out set with `dense` (all dense
// keys, as read) and the rows the shards hold now.
void evaluate_by_slices(controller_actor* self, std::vector<float> dense,
                        std::function<void(caf::expected<evaluation>)> done);

}  // namespace keel
