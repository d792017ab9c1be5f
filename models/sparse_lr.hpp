#pragma once
// sparse_lr is logistic regression on the synthetic sparse data of
// sparse_rows: p(y = 1 | x) = sigmoid(b + sum of w[key] over the row's active
// keys), with w in the sparse key space "sparse_lr.weight" (config.keys keys,
// 2^20 by default) and b the dense tensor "sparse_lr.bias" [1]. Rows are
// regenerated from (seed, row) on every use; the held-out set is rows
// [train_rows, train_rows + test_rows). The model knows the ground truth, so
// it reports w*'s own held-out log loss as its reference and asks a trained
// model for a log loss within 5% of it. Registry name "sparse-lr".
// Immutable and thread-safe per the model contract.

#include <memory>

#include "models/model.hpp"
#include "models/sparse_rows.hpp"

namespace keel {

class sparse_lr final : public model {
 public:
  // Validates `c` and computes w*'s held-out evaluation (a pass over the test rows).
  static caf::expected<std::shared_ptr<const sparse_lr>> make(const sparse_lr_config& c);

  std::string name() const override { return "sparse-lr"; }
  const parameter_layout& layout() const override { return layout_; }
  uint64_t num_train_examples() const override { return rows_.config().train_rows; }
  uint64_t num_test_examples() const override { return rows_.config().test_rows; }
  // Held-out log loss at most 1.05 times the reference's.
  quality_target target() const override;
  // The bias starts at zero (w's keys too, as the default initial_sparse).
  void initial_dense(uint64_t seed, uint64_t first_key, span<float> out) const override;
  std::unique_ptr<model_scratch> make_scratch() const override;

  // The ground truth (w*, b*) scored on the held-out rows.
  const evaluation& reference() const noexcept { return reference_; }
  const sparse_rows& rows() const noexcept { return rows_; }

  explicit sparse_lr(const sparse_lr_config& c);  // use make(); public for make_shared

 protected:
  caf::error do_sparse_keys(span<const uint64_t> batch, model_scratch& scratch,
                            std::vector<uint64_t>& keys) const override;
  caf::error do_gradient(span<const uint64_t> batch, const parameter_view& params,
                         model_scratch& scratch, gradient_buffer& out) const override;
  caf::expected<evaluation> do_evaluate(const full_parameters& params,
                                        model_scratch& scratch) const override;

 private:
  sparse_rows rows_;
  parameter_layout layout_;
  evaluation reference_;
};

// log(1 + exp(x)) without overflow: the logistic loss of margin -x.
double softplus(double x) noexcept;

}  // namespace keel
