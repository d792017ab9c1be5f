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
//   ... pull all dense keys and the values of `keys` ...
//   model.gradient(batch, {dense, keys, values}, scratch, grad);
//   ... push grad.dense and (grad.sparse_keys, grad.sparse_values) ...
// The gradient is that of the batch's mean loss. Applied with plain SGD
// (w -= lr * g) by the shard it is exactly the update the plain_trainer makes.
// Dense and sparse keys are two separate key spaces (parameter_layout).

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/batch_schedule.hpp"
#include "models/parameter_layout.hpp"
#include "models/span.hpp"

namespace keel {

// Per-worker mutable state made by model::make_scratch. Use one per thread.
class model_scratch {
 public:
  virtual ~model_scratch() = default;
};

// The parameters a worker pulled for one batch: every dense key, and the
// values of the sparse keys sparse_keys() returned (sorted ascending; values
// aligned with keys). A view of a dense model has empty sparse spans.
struct parameter_view {
  span<const float> dense;
  span<const uint64_t> sparse_keys;
  span<const float> sparse_values;
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
// batch does not touch). `loss` is the batch's mean loss at the pulled
// parameters, `examples` the batch size.
struct gradient_buffer {
  std::vector<float> dense;
  std::vector<uint64_t> sparse_keys;
  std::vector<float> sparse_values;
  double loss = 0;
  uint32_t examples = 0;
};

// One figure of quality a model reports as itself, e.g. {"mse", 0.0031} or
// {"auc", 0.79}. Names are lowercase words, digits and '_' (they become
// metric labels and JSON keys).
struct named_metric {
  std::string name;
  double value = 0;
};

// Quality on the held-out set. `log_loss` is the mean negative log
// likelihood in nats, set by probabilistic models; `accuracy` is set by
// classifiers; any other figure (a regression's MSE, a ranking's AUC, the
// probe's objective) goes into `metrics` under its own name.
struct evaluation {
  uint64_t examples = 0;
  std::optional<double> log_loss;
  std::optional<double> accuracy;
  std::vector<named_metric> metrics;

  // The figure called `name`: "log_loss", "accuracy" or one of `metrics`;
  // nullopt when the model did not report it.
  std::optional<double> metric(std::string_view name) const;
};

// A bound on one named figure (evaluation::metric): at least `min`, at most
// `max`, either or both.
struct metric_bound {
  std::string name;
  std::optional<double> min;
  std::optional<double> max;
};

// What a trained model should reach on its held-out set, and why.
struct quality_target {
  std::optional<double> min_accuracy;
  std::optional<double> max_log_loss;
  std::string basis;  // e.g. "plain single-thread SGD reaches 0.979"
  std::vector<metric_bound> bounds;  // bounds on any other named figure
};

// True if `e` meets every bound `t` sets (a target with no bound is met; a
// bound on a figure `e` does not report is not met).
bool meets(const evaluation& e, const quality_target& t);

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

  // Fresh per-worker state for this model.
  virtual std::unique_ptr<model_scratch> make_scratch() const = 0;

  // The batch at `at` (see batch_schedule.hpp) over this model's training set.
  caf::error batch_indices(const batch_position& at, std::vector<uint64_t>& out) const;

  // The sparse keys the batch touches, sorted ascending without duplicates,
  // into `keys` (cleared for a dense model). Pull exactly these.
  caf::error sparse_keys(span<const uint64_t> batch, model_scratch& scratch,
                         std::vector<uint64_t>& keys) const;

  // The gradient of the batch's mean loss at `params` into `out`.
  caf::error gradient(span<const uint64_t> batch, const parameter_view& params,
                      model_scratch& scratch, gradient_buffer& out) const;

  // Scores `params` on the held-out set.
  caf::expected<evaluation> evaluate(const full_parameters& params, model_scratch& scratch) const;

 protected:
  // The checked entry points above validate sizes, indices and key order,
  // then call these.
  virtual caf::error do_sparse_keys(span<const uint64_t> batch, model_scratch& scratch,
                                    std::vector<uint64_t>& keys) const;
  virtual caf::error do_gradient(span<const uint64_t> batch, const parameter_view& params,
                                 model_scratch& scratch, gradient_buffer& out) const = 0;
  virtual caf::expected<evaluation> do_evaluate(const full_parameters& params,
                                                model_scratch& scratch) const = 0;

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
};

}  // namespace keel
