#pragma once
// The rows one held-out slice needs, gathered from the shards that hold
// them and scored (models with embedding tables, model::evaluates_slices):
// prepare() asks the model which rows of each table the slice needs and
// groups them by shard with the job's slot map; request(s) is shard s's
// PullRequest (table keys only, at clock 0, which every consistency rule
// serves at once); take(s, reply) lays s's rows where their keys sit;
// score() scores the slice once every asked shard has answered. The
// coordinator (actors/job/slice_evaluation.cpp) and a worker
// (actors/ps/worker_scoring.cpp) both score through it, so a slice's
// partial_evaluation is the same whoever scores it. Holds one slice's rows
// at most; a plain value, reused from slice to slice, not synchronised.

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <cstdint>
#include <vector>

#include "actors/core/hash_slots.hpp"
#include "messages/protocol.hpp"
#include "models/model.hpp"

namespace keel {

class slice_rows {
 public:
  // Empty until prepare().
  slice_rows() = default;

  // The rows `slice` needs from `m`'s tables, grouped by `slots`. Errors:
  // the model's (an empty slice, one past the test set).
  caf::error prepare(const model& m, const slot_map& slots, test_slice slice, model_scratch& scratch);

  test_slice slice() const { return slice_; }
  // The shards holding some of the slice's rows, ascending.
  const std::vector<uint32_t>& shards() const { return asked_; }
  // Shard `shard`'s pull: sent by `worker` (its index; the coordinator
  // names 0), naming the shard incarnation's fencing epoch (0: any).
  pull_request_msg request(uint32_t shard, uint32_t worker, uint64_t epoch) const;
  // Takes `shard`'s reply; invalid_field, naming the shard and table, when
  // it does not hold exactly the rows asked.
  caf::error take(uint32_t shard, schema::PullReply::Reader reply);
  // Scores the slice with `dense` (every dense key) and the rows taken.
  caf::expected<partial_evaluation> score(const model& m, span<const float> dense,
                                          model_scratch& scratch);

 private:
  test_slice slice_;
  std::vector<uint32_t> dims_;               // per table
  std::vector<uint64_t> sparse_keys_;        // the model's, unused by table models
  table_key_lists keys_;                     // per table, ascending
  std::vector<shard_split> split_;           // per table: its keys by shard
  std::vector<std::vector<float>> rows_;     // per table, aligned with keys_
  std::vector<table_rows> views_;
  std::vector<uint32_t> asked_;
};

}  // namespace keel
