#pragma once
// A partial_evaluation is a binary classifier's score on one held-out slice
// in a form that merges exactly: the evaluation of a test set cut into
// slices anywhere, scored on any workers and merged in any order, is the
// same, bit for bit, as that of the whole set scored at once. Counts are
// integers; the log loss is a fixed_sum; the AUC comes from a
// score_histogram (models/auc.hpp, whose tie_bound() bounds its error).
// Plain values, not synchronised.

#include <cstdint>

#include "models/auc.hpp"
#include "models/evaluation.hpp"

namespace keel {

// A sum of non-negative reals that is exact and independent of the order of
// its terms: each term is rounded once to a multiple of 2^-32 (an error
// below 1.2e-10 a term) and capped at 2^31, and the terms are added as a
// 128-bit integer (two words), which cannot overflow below 2^64 terms.
class fixed_sum {
 public:
  static constexpr double unit = 1.0 / 4294967296.0;  // 2^-32
  static constexpr double cap = 2147483648.0;         // 2^31

  // Adds `v`; a negative term counts as 0, one above `cap` (or +inf) as
  // `cap`. A NaN is the caller's to count (partial_evaluation does).
  void add(double v) noexcept;
  void merge(const fixed_sum& other) noexcept;
  // The sum, rounded to a double.
  double value() const noexcept;

  // The two words, for a wire: the sum is (high * 2^64 + low) * 2^-32.
  uint64_t high() const noexcept { return high_; }
  uint64_t low() const noexcept { return low_; }
  static fixed_sum from_words(uint64_t high, uint64_t low) noexcept;

  bool operator==(const fixed_sum& o) const noexcept {
    return high_ == o.high_ && low_ == o.low_;
  }

 private:
  void add_units(uint64_t units) noexcept;

  uint64_t high_ = 0;
  uint64_t low_ = 0;
};

struct partial_evaluation {
  uint64_t examples = 0;    // examples scored
  uint64_t correct = 0;     // examples whose score > 0 agrees with the label
  uint64_t non_finite = 0;  // examples whose loss was NaN (their log loss is unknown)
  fixed_sum loss_nats;      // sum of the other examples' negative log likelihoods
  score_histogram scores;   // the examples' scores (margins) by label

  // Adds `other` (a disjoint slice) to this one.
  void merge(const partial_evaluation& other);

  // The evaluation of the examples merged so far: log_loss (NaN when any
  // example's loss was NaN), accuracy, and the metrics "auc" and
  // "auc_tie_bound" (NaN without both classes).
  evaluation result() const;
};

}  // namespace keel
