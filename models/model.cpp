#include "models/model.hpp"

#include <algorithm>
#include <string>

#include "messages/errors.hpp"

namespace keel {

namespace {

caf::error check_batch(const model& m, span<const uint64_t> batch) {
  const uint64_t n = m.num_train_examples();
  for (size_t i = 0; i < batch.size(); ++i)
    if (batch[i] >= n)
      return make_error(errc::invalid_argument, m.name() + ": batch[" + std::to_string(i) +
                                                    "] = " + std::to_string(batch[i]) +
                                                    " is not below the " + std::to_string(n) +
                                                    " training examples");
  if (batch.empty())
    return make_error(errc::invalid_argument, m.name() + ": empty batch");
  return {};
}

}  // namespace

std::optional<double> evaluation::metric(std::string_view name) const {
  if (name == "log_loss")
    return log_loss;
  if (name == "accuracy")
    return accuracy;
  for (auto& m : metrics)
    if (m.name == name)
      return m.value;
  return std::nullopt;
}

bool meets(const evaluation& e, const quality_target& t) {
  if (t.min_accuracy && (!e.accuracy || *e.accuracy < *t.min_accuracy))
    return false;
  if (t.max_log_loss && !(e.log_loss && *e.log_loss <= *t.max_log_loss))
    return false;
  for (auto& b : t.bounds) {
    auto v = e.metric(b.name);
    // NaN fails both comparisons, so a diverged figure never meets a bound.
    if (!v || (b.min && !(*v >= *b.min)) || (b.max && !(*v <= *b.max)))
      return false;
  }
  return true;
}

void model::initial_sparse(uint64_t, span<const uint64_t>, span<float> out) const {
  std::fill(out.begin(), out.end(), 0.0f);
}

caf::error model::batch_indices(const batch_position& at, std::vector<uint64_t>& out) const {
  return keel::batch_indices(num_train_examples(), at, out);
}

caf::error model::sparse_keys(span<const uint64_t> batch, model_scratch& scratch,
                              std::vector<uint64_t>& keys) const {
  if (auto err = check_batch(*this, batch))
    return err;
  return do_sparse_keys(batch, scratch, keys);
}

caf::error model::do_sparse_keys(span<const uint64_t>, model_scratch&,
                                 std::vector<uint64_t>& keys) const {
  keys.clear();
  return {};
}

caf::error model::gradient(span<const uint64_t> batch, const parameter_view& params,
                           model_scratch& scratch, gradient_buffer& out) const {
  if (auto err = check_batch(*this, batch))
    return err;
  const auto& lay = layout();
  if (params.dense.size() != lay.dense_size())
    return make_error(errc::invalid_argument,
                      name() + ": parameter_view.dense has " + std::to_string(params.dense.size()) +
                          " values, the layout " + std::to_string(lay.dense_size()));
  if (params.sparse_keys.size() != params.sparse_values.size())
    return make_error(errc::invalid_argument,
                      name() + ": parameter_view has " + std::to_string(params.sparse_keys.size()) +
                          " sparse keys but " + std::to_string(params.sparse_values.size()) +
                          " sparse values");
  for (size_t i = 0; i < params.sparse_keys.size(); ++i) {
    const uint64_t k = params.sparse_keys[i];
    if (k >= lay.sparse_key_count() || (i > 0 && k <= params.sparse_keys[i - 1]))
      return make_error(errc::invalid_argument,
                        name() + ": parameter_view.sparse_keys[" + std::to_string(i) +
                            "] = " + std::to_string(k) +
                            " is out of the sparse key space or not in ascending order");
  }
  return do_gradient(batch, params, scratch, out);
}

caf::expected<evaluation> model::evaluate(const full_parameters& params,
                                          model_scratch& scratch) const {
  const auto& lay = layout();
  if (params.dense.size() != lay.dense_size() || params.sparse.size() != lay.sparse_key_count())
    return make_error(errc::invalid_argument,
                      name() + ": full_parameters has " + std::to_string(params.dense.size()) +
                          " dense and " + std::to_string(params.sparse.size()) +
                          " sparse values, the layout " + std::to_string(lay.dense_size()) +
                          " and " + std::to_string(lay.sparse_key_count()));
  return do_evaluate(params, scratch);
}

caf::error model::scratch_mismatch() const {
  return make_error(errc::invalid_argument,
                    name() + ": the model_scratch was made by another model's make_scratch()");
}

}  // namespace keel
