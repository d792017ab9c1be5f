#pragma once
// A model is a training workload behind the interface keel's workers use and
// an embedding application implements: a parameter layout, initial parameters
// from a seed, a deterministic batch schedule, the gradient of a batch and an
// evaluation on held-out data. A model is immutable once built (its datasets
// included): every member is const and may be called from many threads at
// once, provided each thread passes its own model_scratch, the per-worker
// mutable state (buffers reused from step to step so that a step allocates
// nothing once warm). Failures are values: a view of the wrong size, an
// example index out of range, sparse keys out of order, a sparse key the
// batch needs but the view lacks, or a scratch made by another kind of model
// give an invalid_argument error, never undefined behaviour.
//
// One training step of a worker:
//   model.batch_indices(position, batch);            // which examples
//   model.sparse_keys(batch, scratch, keys);         // which sparse keys to pull
//   model.table_keys(batch, scratch, rows);          // which rows of each table
//   ... pull all dense keys, the values of `keys`, the rows of `rows` ...
//   model.gradient(batch, {dense, keys, values, tables}, scratch, grad);
//   ... push grad.dense, (grad.sparse_keys, grad.sparse_values) and, per
//       table t, (grad.tables[t].keys, grad.tables[t].rows) ...
// The gradient is that of the batch's mean loss. Applied with plain SGD
// (w -= lr * g) by the shard it is exactly the update the plain_trainer makes.
// Dense and sparse keys are two separate key spaces (parameter_layout);
// each embedding table is a key space of its own, any uint64 a key.
//
// Evaluation without gathering (models that evaluates_slices()): the test
// set is cut into slices [first, first + count) of its examples; for each,
//   model.test_keys(slice, scratch, keys, rows);    // what the slice needs
//   ... pull all dense keys, `keys` and `rows` as for a step ...
//   part = model.evaluate_slice(slice, view, scratch);
// and the parts merge exactly (partial_evaluation::merge, in any order),
// part.result() being the evaluation of the whole. evaluate() on
// full_parameters stays for models whose parameters one process holds.

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/batch_schedule.hpp"
#include "models/evaluation.hpp"
#include "models/parameter_layout.hpp"
#include "models/partial_evaluation.hpp"
#include "models/span.hpp"

namespace keel {

// Per-worker mutable state made by model::make_scratch. Use one per thread.
class model_scratch {
 public:
  virtual ~model_scratch() = default;
};

// The keys of each embedding table a batch or a slice needs: entry t for
// table t of the layout, sorted ascending without duplicates (possibly
// empty). One entry per table, none for a model without tables.
using table_key_lists = std::vector<std::vector<uint64_t>>;

// Rows of one table as pulled: `keys` ascending and distinct, `rows` holds
// keys.size() * dim floats, row i (rows[i * dim, (i + 1) * dim)) that of keys[i].
struct table_rows {
  span<const uint64_t> keys;
  span<const float> rows;
};

// The parameters a worker pulled for one batch: every dense key, the
// values of the sparse keys sparse_keys() returned (sorted ascending; values
// aligned with keys), and for each table t the rows table_keys() named
// (tables[t]; empty span for a model without tables). A view of a dense
// model has empty sparse spans. A view may hold more keys or rows than the
// batch needs (models look keys up), never fewer.
struct parameter_view {
  span<const float> dense;
  span<const uint64_t> sparse_keys;
  span<const float> sparse_values;
  span<const table_rows> tables = {};
};

// A held-out slice: test examples [first, first + count) of the model's
// num_test_examples().
struct test_slice {
  uint64_t first = 0;
  uint64_t count = 0;
};

// The gradient of one table's rows: `keys` equals the view's keys of the
// table and `rows` (keys.size() * dim) the gradient of each row (zero for a
// row the batch does not touch).
struct table_gradient {
  std::vector<uint64_t> keys;
  std::vector<float> rows;
};

// All parameters, for evaluation: every dense key and every sparse key
// (`sparse[k]` is key k; empty for a dense model).
struct full_parameters {
  span<const float> dense;
  span<const float> sparse;
};

// A gradient, reused from step to step (its vectors keep their capacity).
// `dense` has one value per dense key; `sparse_keys` equals the view's sparse
// keys and `sparse_values` holds the gradient of each (zero for a key the
// batch does not touch); `tables` has one table_gradient per table of the
// layout (none for a model without tables). `loss` is the batch's mean loss
// at the pulled parameters, `examples` the batch size.
struct gradient_buffer {
  std::vector<float> dense;
  std::vector<uint64_t> sparse_keys;
  std::vector<float> sparse_values;
  double loss = 0;
  uint32_t examples = 0;
  std::vector<table_gradient> tables = {};
};

class model {
 public:
  virtual ~model() = default;

  // The registry name, e.g. "mnist-mlp".
  virtual std::string name() const = 0;
  // The parameters' names, shapes and keys; fixed for the model's lifetime.
  virtual const parameter_layout& layout() const = 0;
  // Examples in the training set (batch indices are below this).
  virtual uint64_t num_train_examples() const = 0;
  // Examples evaluate() scores.
  virtual uint64_t num_test_examples() const = 0;
  // The bar a trained model should clear (see quality_target).
  virtual quality_target target() const = 0;

  // Initial values of dense keys [first_key, first_key + out.size()), a pure
  // function of (seed, key): a shard initialises its own range alone and gets
  // the values a single process would. The range must lie inside the layout.
  virtual void initial_dense(uint64_t seed, uint64_t first_key, span<float> out) const = 0;
  // Initial values of sparse keys (aligned with `keys`); zero unless a model
  // says otherwise. Also a pure function of (seed, key).
  virtual void initial_sparse(uint64_t seed, span<const uint64_t> keys, span<float> out) const;
  // Initial rows of table `table` for `keys` into `out` (keys.size() * dim
  // floats, row i that of keys[i]): a pure function of (seed, table, key),
  // so a row created on first touch by any shard, or recreated after a
  // restore, has the same value. Errors: a table out of the layout, an
  // `out` of another size.
  caf::error initial_rows(uint64_t seed, uint32_t table, span<const uint64_t> keys,
                          span<float> out) const;

  // Fresh per-worker state for this model.
  virtual std::unique_ptr<model_scratch> make_scratch() const = 0;

  // The batch at `at` (see batch_schedule.hpp) over this model's training set.
  caf::error batch_indices(const batch_position& at, std::vector<uint64_t>& out) const;

  // The sparse keys the batch touches, sorted ascending without duplicates,
  // into `keys` (cleared for a dense model). Pull exactly these.
  caf::error sparse_keys(span<const uint64_t> batch, model_scratch& scratch,
                         std::vector<uint64_t>& keys) const;

  // The rows of each table the batch touches (see table_key_lists) into
  // `keys`; an empty list for a model without tables. Pull exactly these.
  caf::error table_keys(span<const uint64_t> batch, model_scratch& scratch,
                        table_key_lists& keys) const;

  // The gradient of the batch's mean loss at `params` into `out`.
  caf::error gradient(span<const uint64_t> batch, const parameter_view& params,
                      model_scratch& scratch, gradient_buffer& out) const;

  // Scores `params` on the held-out set.
  caf::expected<evaluation> evaluate(const full_parameters& params, model_scratch& scratch) const;

  // True if the model scores held-out slices (test_keys, evaluate_slice);
  // false by default, and then those two return invalid_argument.
  virtual bool evaluates_slices() const { return false; }
  // The sparse keys and table rows `slice` needs (as sparse_keys and
  // table_keys for a batch). Errors: an empty slice or one past the test set.
  caf::error test_keys(const test_slice& slice, model_scratch& scratch,
                       std::vector<uint64_t>& sparse_keys, table_key_lists& table_keys) const;
  // Scores `params` (holding at least what test_keys named) on `slice`.
  caf::expected<partial_evaluation> evaluate_slice(const test_slice& slice,
                                                   const parameter_view& params,
                                                   model_scratch& scratch) const;

 protected:
  // The checked entry points above validate sizes, indices and key order,
  // then call these.
  virtual caf::error do_sparse_keys(span<const uint64_t> batch, model_scratch& scratch,
                                    std::vector<uint64_t>& keys) const;
  virtual caf::error do_gradient(span<const uint64_t> batch, const parameter_view& params,
                                 model_scratch& scratch, gradient_buffer& out) const = 0;
  virtual caf::expected<evaluation> do_evaluate(const full_parameters& params,
                                                model_scratch& scratch) const = 0;
  // Zero rows by default.
  virtual void do_initial_rows(uint64_t seed, uint32_t table, span<const uint64_t> keys,
                               span<float> out) const;
  // One empty list per table by default.
  virtual caf::error do_table_keys(span<const uint64_t> batch, model_scratch& scratch,
                                   table_key_lists& keys) const;
  // Unsupported by default (see evaluates_slices).
  virtual caf::error do_test_keys(const test_slice& slice, model_scratch& scratch,
                                  std::vector<uint64_t>& sparse_keys,
                                  table_key_lists& table_keys) const;
  virtual caf::expected<partial_evaluation> do_evaluate_slice(const test_slice& slice,
                                                              const parameter_view& params,
                                                              model_scratch& scratch) const;

  // The scratch as the model's own type, or an invalid_argument error when
  // it was made by another kind of model.
  template <class Scratch>
  caf::expected<Scratch*> own_scratch(model_scratch& s) const {
    if (auto* p = dynamic_cast<Scratch*>(&s))
      return p;
    return scratch_mismatch();
  }

 private:
  caf::error scratch_mismatch() const;
  caf::error check_view(const parameter_view& params) const;
  caf::error check_slice(const test_slice& slice) const;
};

}  // namespace keel
