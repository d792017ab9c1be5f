#pragma once
// ctr_data generates a synthetic click log in the shape of the public
// Criteo logs from a seed alone: example `row` is a pure function of (seed,
// row), computed on demand on any thread, so no worker holds a data set.
// Each example has 13 numeric features (log(1 + count), a count being 0 for
// a third of the values and else log-normal), 26 categorical fields, and a
// click label. Field f's ID is rank - 1 for a rank drawn from a Zipf law of
// exponent s over `vocabulary` ranks (zipf_sampler: O(1) a draw), and its
// key is a 64-bit bijective hash of (field, ID): distinct IDs of a field
// never share a key. Training rows are [0, train_examples); test example i
// is row train_examples + i.
//
// The label is drawn from a planted model, so the best possible (Bayes)
// log loss of any set of rows is known exactly: y ~ Bernoulli(sigmoid(m))
// with m = true_bias + sum_j u_j * numeric_j + sum_f w(f, id_f) +
// sum over field pairs f < g of <v(f, id_f), v(g, id_g)>. u, w and v are
// pure functions of (seed, field, id) (counter_rng.hpp); the scales of w and
// v fall with the ID (popular IDs carry most of the signal, as in click
// data; see ctr_config). Immutable: share it between threads.

#include <array>
#include <caf/expected.hpp>
#include <cstdint>

#include "models/model_configs.hpp"
#include "models/partial_evaluation.hpp"
#include "models/zipf_sampler.hpp"

namespace keel {

constexpr uint32_t ctr_numeric_fields = 13;
constexpr uint32_t ctr_categorical_fields = 26;

// One example of the click log.
struct ctr_example {
  std::array<float, ctr_numeric_fields> numeric{};  // log(1 + count)
  std::array<uint64_t, ctr_categorical_fields> ids{};   // in [0, vocabulary)
  std::array<uint64_t, ctr_categorical_fields> keys{};  // the IDs' hashed keys
  uint8_t label = 0;
  double planted_margin = 0;  // m, the planted logit
};

// Checks a config: vocabulary in [1000, 2^40], positive example counts
// summing below 2^62, zipf_exponent in [0.5, 2], fm_factors in [1, 64],
// planted_factors at most 16, non-negative scales, positive half rank.
// Errors are invalid_argument naming the field.
caf::error validate(const ctr_config& c);

class ctr_data {
 public:
  // The generator for `c`, which must be valid (see validate).
  explicit ctr_data(const ctr_config& c);

  const ctr_config& config() const noexcept { return config_; }
  const zipf_sampler& zipf() const noexcept { return zipf_; }

  // Example `row` into `out`. Deterministic in (seed, row).
  void generate(uint64_t row, ctr_example& out) const;

  // The key of `id` in field `field` (a bijection of the ID for each field).
  uint64_t key_of(uint32_t field, uint64_t id) const noexcept;

  // The planted model's own score of rows [first, first + count): its log
  // loss is the Bayes log loss of those rows, its AUC the best achievable.
  partial_evaluation planted_evaluation(uint64_t first, uint64_t count) const;

 private:
  double id_terms(uint32_t field, uint64_t id, double* factors) const noexcept;

  ctr_config config_;
  zipf_sampler zipf_;
  std::array<uint64_t, ctr_categorical_fields> field_salt_{};
  std::array<double, ctr_numeric_fields> numeric_weight_{};
  std::array<double, ctr_numeric_fields> count_mean_{};   // of ln(count)
  std::array<double, ctr_numeric_fields> count_sigma_{};  // of ln(count)
};

// log(1 + exp(x)) without overflow (defined in sparse_lr.cpp, declared there too).
double softplus(double x) noexcept;

}  // namespace keel
