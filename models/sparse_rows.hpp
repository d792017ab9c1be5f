#pragma once
// sparse_rows generates the synthetic sparse logistic-regression data set
// from a seed alone: any row r is a pure function of (seed, r), so a worker
// regenerates any row exactly and nothing is stored. Row r has between
// min_features and max_features distinct active binary features (count drawn
// uniformly), each drawn from a Zipf-like popularity over `keys` keys, and a
// label y ~ Bernoulli(sigmoid(b* + sum of w*[key])) under a known ground
// truth w*. Popularity ranks are scattered over the key space by a keyed
// permutation, so hot keys do not all land in one shard's range. Immutable:
// share it freely between threads.
//
// Popularity: a draw's rank is floor(X) - 1 where X has density proportional
// to x^-s on [1, keys + 1) (a continuous Zipf with exponent s), so
// P(rank r) = F(r + 2) - F(r + 1) (see rank_probability). A draw that
// repeats a key already in the row is drawn again: a key occurs at most
// once a row, so the hottest keys are in nearly every row.
// Ground truth: w*[key] = weight_scale * z(key) / sqrt(1 + rank(key) /
// weight_half_rank), z(key) uniform on [-sqrt 3, sqrt 3] (unit variance)
// from (seed, key). Popular keys carry most of the signal, as in click data,
// while every key of the space is used and has a weight; with the defaults
// plain SGD over the 500k training rows gets within about 3.5% of w*'s
// held-out log loss (see plain_trainer.hpp for the measured figures).
//
// Cost: the key and w* of the 2^16 most popular ranks (about 80% of all
// draws) are tabulated at construction (512 KiB, cache-resident); rarer
// ranks are computed (a Feistel permutation and a hash), which is cheaper
// than a cache miss into a table of every key.

#include <caf/expected.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "models/keyed_permutation.hpp"
#include "models/model_configs.hpp"

namespace keel {


// Checks a config: 4 * max_features <= keys <= 2^26, 1 <= min_features <=
// max_features <= 1024, positive row counts, zipf_exponent in [0.5, 1.5],
// positive scales. Errors are invalid_argument naming the field.
caf::error validate(const sparse_lr_config& c);

class sparse_rows {
 public:
  // The generator for `c`, which must be valid (see validate).
  explicit sparse_rows(const sparse_lr_config& c);

  const sparse_lr_config& config() const noexcept { return config_; }

  // Appends row `row`'s active keys to `keys` (in draw order, distinct) and
  // returns its label (0 or 1). Deterministic in (seed, row). When
  // `true_margin` is given it receives b* + sum of w* over the row.
  int generate(uint64_t row, std::vector<uint64_t>& keys, double* true_margin = nullptr) const;

  // The number of active features row `row` has.
  uint32_t feature_count(uint64_t row) const noexcept;

  // The key of popularity rank `rank` (0 = most popular) and its inverse.
  uint64_t key_of_rank(uint64_t rank) const noexcept {
    return rank < head_keys_.size() ? head_keys_[rank] : scatter_(rank);
  }
  uint64_t rank_of_key(uint64_t key) const noexcept { return scatter_.inverse(key); }

  // The probability that one draw picks rank `rank`.
  double rank_probability(uint64_t rank) const noexcept;

  // w*[key] and b*.
  double true_weight(uint64_t key) const noexcept;
  double true_bias() const noexcept { return config_.true_bias; }

 private:
  uint64_t draw_rank(uint64_t row_key, uint64_t draw) const noexcept;
  float weight_of(uint64_t key, uint64_t rank) const noexcept;
  double cdf(double x) const noexcept;

  sparse_lr_config config_;
  keyed_permutation scatter_;
  uint64_t feature_key_;             // seeds of the per-row feature streams
  uint64_t weight_key_;              // seed of the z(key) stream
  std::vector<uint32_t> head_keys_;  // key_of_rank for the most popular ranks
  std::vector<float> head_weights_;  // w* of those keys
  double log_top_ = 0;               // ln(keys + 1), for s == 1
  double top_pow_ = 0;               // (keys + 1)^(1 - s) - 1, for s != 1
};

}  // namespace keel
