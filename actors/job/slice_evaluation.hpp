#pragma once
// Scoring a model with embedding tables (model::evaluates_slices) without
// gathering its rows. The held-out set is cut into slices
// (slice_dispatch.hpp) and, unless evaluation_config::on_workers is off,
// the job's live workers score them, each pulling the rows its slices need
// from the shards through its own routing (actors/ps/worker_scoring.cpp);
// a worker that fails or does not answer within
// evaluation_config::slice_deadline loses its slice to another worker (a
// `retry` event names both), and once no worker is left the coordinator
// scores the rest itself. The coordinator's own scoring of a slice is the
// path it always had: it asks every shard for the rows the slice needs (a
// PullRequest of table keys only, at clock 0, which every consistency rule
// serves at once), lays them out for the model and scores them, one slice
// at a time, so its memory does not grow with the model. The partial
// results merge exactly (partial_evaluation), so the evaluation is the same
// bit for bit whoever scored which slice. Runs on the controller's thread
// as a chain of continuations; `done` gets the evaluation of the whole
// set, or the first error of the coordinator's own scoring (a shard that
// is not up or does not answer, a reply that does not fit the request, a
// model error), naming the shard or the slice.

#include <functional>
#include <vector>

#include <caf/expected.hpp>

#include "actors/job/job_controller.hpp"
#include "actors/job/slice_dispatch.hpp"
#include "models/evaluation.hpp"

namespace keel {

// Scores the training model on its held-out set with `dense` (all dense
// keys, as read) and the rows the shards hold now.
void evaluate_by_slices(controller_actor* self, std::vector<float> dense,
                        std::function<void(caf::expected<evaluation>)> done);

}  // namespace keel
