#pragma once
// ctr_model is the click-through-rate workload on the synthetic click log
// of ctr_data, in two registry flavours:
//  - "ctr-lr": logistic regression over hashed IDs, p(click) =
//    sigmoid(b + u . numeric + sum over fields f of w_f[key_f]);
//  - "ctr-fm": a factorization machine of k = fm_factors factors, which adds
//    the pairwise terms sum over f < g of <v_f[key_f], v_g[key_g]>.
// Each of the 26 categorical fields is an embedding table of its own
// ("ctr_lr.c1" .. "ctr_lr.c26", or "ctr_fm.c1" ..), keyed by the hashed
// IDs; a row is w (d = 1) for ctr-lr and (w, v_1 .. v_k) (d = 1 + k) for
// ctr-fm. The dense tensors are "<prefix>.numeric" [13] and "<prefix>.bias"
// [1]; they start at 0, as do the w's, and the v's start at small values
// (0.01 times a unit-variance uniform), a pure function of (seed, table,
// key, element). The model is scored by held-out slices (evaluates_slices:
// test_keys, evaluate_slice); evaluate() on full_parameters has no tables
// to read and returns invalid_argument. Immutable and thread-safe per the
// model contract.

#include <memory>

#include "models/ctr_data.hpp"
#include "models/model.hpp"

namespace keel {

// The plain trainer's settings for the click-log models: AdaGrad (the
// shards' rule: initial accumulator 0.1, epsilon 1e-8) at this learning
// rate, batch 256, one epoch. The reference figures in plain_trainer.hpp
// and ctr_model::target() are measured with them.
constexpr uint32_t ctr_plain_batch = 256;
float ctr_plain_lr(uint32_t factors) noexcept;

class ctr_model final : public model {
 public:
  // factors = 0 is ctr-lr, factors > 0 ctr-fm with that many factors.
  // Validates `c` and scores the planted model on the test rows (its
  // log loss is the Bayes log loss, planted()).
  static caf::expected<std::shared_ptr<const ctr_model>> make(const ctr_config& c,
                                                              uint32_t factors);

  std::string name() const override { return factors_ == 0 ? "ctr-lr" : "ctr-fm"; }
  const parameter_layout& layout() const override { return layout_; }
  uint64_t num_train_examples() const override { return data_.config().train_examples; }
  uint64_t num_test_examples() const override { return data_.config().test_examples; }
  // For the default config: within 0.5% of the plain trainer's log loss and
  // 0.002 of its AUC (the figures in the basis); for any other, a log loss
  // below the base rate's entropy and an AUC above the midpoint of 0.5 and
  // the planted model's.
  quality_target target() const override;
  void initial_dense(uint64_t seed, uint64_t first_key, span<float> out) const override;
  std::unique_ptr<model_scratch> make_scratch() const override;
  bool evaluates_slices() const override { return true; }

  uint32_t factors() const noexcept { return factors_; }
  uint32_t row_dim() const noexcept { return 1 + factors_; }
  const ctr_data& data() const noexcept { return data_; }
  // The planted model's evaluation of the test set: its log loss is the
  // Bayes log loss, its AUC the best achievable.
  const evaluation& planted() const noexcept { return planted_; }
  // The test set's click rate and its entropy (the log loss of always
  // predicting that rate).
  double base_rate() const noexcept { return base_rate_; }
  double base_entropy() const noexcept;

  ctr_model(const ctr_config& c, uint32_t factors);  // use make(); public for make_shared

 protected:
  void do_initial_rows(uint64_t seed, uint32_t table, span<const uint64_t> keys,
                       span<float> out) const override;
  caf::error do_table_keys(span<const uint64_t> batch, model_scratch& scratch,
                           table_key_lists& keys) const override;
  caf::error do_gradient(span<const uint64_t> batch, const parameter_view& params,
                         model_scratch& scratch, gradient_buffer& out) const override;
  caf::expected<evaluation> do_evaluate(const full_parameters& params,
                                        model_scratch& scratch) const override;
  caf::error do_test_keys(const test_slice& slice, model_scratch& scratch,
                          std::vector<uint64_t>& sparse_keys,
                          table_key_lists& table_keys) const override;
  caf::expected<partial_evaluation> do_evaluate_slice(const test_slice& slice,
                                                      const parameter_view& params,
                                                      model_scratch& scratch) const override;

 private:
  ctr_data data_;
  uint32_t factors_;
  parameter_layout layout_;
  evaluation planted_;
  double base_rate_ = 0;
};

}  // namespace keel
