// A slice's rows by shard, the pulls that fetch them and the scoring once
// they are in; see slice_rows.hpp.
#include "actors/core/slice_rows.hpp"

#include <cstring>
#include <string>

#include "actors/core/worker_core.hpp"
#include "messages/errors.hpp"

namespace keel {

caf::error slice_rows::prepare(const model& m, const slot_map& slots, test_slice slice,
                               model_scratch& scratch) {
  slice_ = slice;
  auto& tables = m.layout().tables();
  dims_.clear();
  for (auto& t : tables) dims_.push_back(t.dim);
  split_.resize(dims_.size());
  rows_.resize(dims_.size());
  views_.resize(dims_.size());
  if (auto err = m.test_keys(slice, scratch, sparse_keys_, keys_))
    return err;
  if (keys_.size() != dims_.size())
    return make_error(errc::invalid_field, "evaluation: the model named rows of " + std::to_string(keys_.size()) +
                                             " tables, its layout has " + std::to_string(dims_.size()));
  asked_.clear();
  std::vector<bool> asks(slots.shard_count(), false);
  for (size_t t = 0; t < dims_.size(); ++t) {
    split_by_shard(slots, keys_[t].data(), keys_[t].size(), split_[t]);
    rows_[t].resize(keys_[t].size() * dims_[t]);
    for (uint32_t s = 0; s < slots.shard_count(); ++s) asks[s] = asks[s] || split_[t].count(s) > 0;
  }
  for (uint32_t s = 0; s < asks.size(); ++s)
    if (asks[s])
      asked_.push_back(s);
  return {};
}

pull_request_msg slice_rows::request(uint32_t shard, uint32_t worker, uint64_t epoch) const {
  return make_pull_request(worker, shard, epoch, 0, key_range{}, {}, split_);
}

caf::error slice_rows::take(uint32_t shard, schema::PullReply::Reader reply) {
  return take_pulled_rows(shard, reply, split_, dims_, rows_);
}

caf::expected<partial_evaluation> slice_rows::score(const model& m, span<const float> dense,
                                                    model_scratch& scratch) {
  for (size_t t = 0; t < views_.size(); ++t) views_[t] = {keys_[t], rows_[t]};
  parameter_view view{dense, {}, {}, span<const table_rows>(views_.data(), views_.size())};
  return m.evaluate_slice(slice_, view, scratch);
}

}  // namespace keel
