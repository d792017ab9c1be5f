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

// A view's tables: one per table of the layout (or none for a model
// without tables), keys ascending, rows keys.size() * dim.
caf::error check_tables(const model& m, span<const table_rows> tables) {
  const auto& specs = m.layout().tables();
  if (tables.size() != specs.size())
    return make_error(errc::invalid_argument,
                      m.name() + ": parameter_view.tables has " + std::to_string(tables.size()) +
                          " tables, the layout " + std::to_string(specs.size()));
  for (size_t t = 0; t < tables.size(); ++t) {
    const auto& keys = tables[t].keys;
    if (tables[t].rows.size() != keys.size() * uint64_t{specs[t].dim})
      return make_error(errc::invalid_argument,
                        m.name() + ": parameter_view.tables[" + std::to_string(t) + "] (" +
                            specs[t].name + ") has " + std::to_string(keys.size()) + " keys but " +
                            std::to_string(tables[t].rows.size()) + " floats, not keys * " +
                            std::to_string(specs[t].dim));
    for (size_t i = 1; i < keys.size(); ++i)
      if (keys[i] <= keys[i - 1])
        return make_error(errc::invalid_argument,
                          m.name() + ": parameter_view.tables[" + std::to_string(t) + "] (" +
                              specs[t].name + ") keys[" + std::to_string(i) + "] = " +
                              std::to_string(keys[i]) + " is not above the key before it");
  }
  return {};
}

}  // namespace

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

caf::error model::table_keys(span<const uint64_t> batch, model_scratch& scratch,
                             table_key_lists& keys) const {
  if (auto err = check_batch(*this, batch))
    return err;
  return do_table_keys(batch, scratch, keys);
}

caf::error model::do_table_keys(span<const uint64_t>, model_scratch&,
                                table_key_lists& keys) const {
  keys.resize(layout().tables().size());
  for (auto& k : keys) k.clear();
  return {};
}

caf::error model::initial_rows(uint64_t seed, uint32_t table, span<const uint64_t> keys,
                               span<float> out) const {
  const auto& tables = layout().tables();
  if (table >= tables.size())
    return make_error(errc::invalid_argument, name() + ": initial_rows of table " +
                                                  std::to_string(table) + ", the layout has " +
                                                  std::to_string(tables.size()) + " tables");
  const uint64_t want = keys.size() * uint64_t{tables[table].dim};
  if (out.size() != want)
    return make_error(errc::invalid_argument,
                      name() + ": initial_rows of table " + tables[table].name + " for " +
                          std::to_string(keys.size()) + " keys needs " + std::to_string(want) +
                          " floats, the output has " + std::to_string(out.size()));
  do_initial_rows(seed, table, keys, out);
  return {};
}

void model::do_initial_rows(uint64_t, uint32_t, span<const uint64_t>, span<float> out) const {
  std::fill(out.begin(), out.end(), 0.0f);
}

caf::error model::gradient(span<const uint64_t> batch, const parameter_view& params,
                           model_scratch& scratch, gradient_buffer& out) const {
  if (auto err = check_batch(*this, batch))
    return err;
  if (auto err = check_view(params))
    return err;
  return do_gradient(batch, params, scratch, out);
}

caf::error model::check_view(const parameter_view& params) const {
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
  return check_tables(*this, params.tables);
}

caf::error model::check_slice(const test_slice& slice) const {
  const uint64_t n = num_test_examples();
  if (slice.count == 0 || slice.first > n || slice.count > n - slice.first)
    return make_error(errc::invalid_argument,
                      name() + ": test slice [" + std::to_string(slice.first) + ", +" +
                          std::to_string(slice.count) + ") is empty or past the " +
                          std::to_string(n) + " test examples");
  return {};
}

caf::error model::test_keys(const test_slice& slice, model_scratch& scratch,
                            std::vector<uint64_t>& sparse_keys, table_key_lists& table_keys) const {
  if (auto err = check_slice(slice))
    return err;
  return do_test_keys(slice, scratch, sparse_keys, table_keys);
}

caf::expected<partial_evaluation> model::evaluate_slice(const test_slice& slice,
                                                        const parameter_view& params,
                                                        model_scratch& scratch) const {
  if (auto err = check_slice(slice))
    return err;
  if (auto err = check_view(params))
    return err;
  return do_evaluate_slice(slice, params, scratch);
}

caf::error model::do_test_keys(const test_slice&, model_scratch&, std::vector<uint64_t>&,
                               table_key_lists&) const {
  return make_error(errc::invalid_argument,
                    name() + " does not evaluate held-out slices; use evaluate()");
}

caf::expected<partial_evaluation> model::do_evaluate_slice(const test_slice&,
                                                           const parameter_view&,
                                                           model_scratch&) const {
  return make_error(errc::invalid_argument,
                    name() + " does not evaluate held-out slices; use evaluate()");
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
