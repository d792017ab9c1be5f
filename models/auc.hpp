#pragma once
// The area under the ROC curve of a binary scorer, computed from a score
// histogram that merges exactly: a histogram counts positives and negatives
// per bin of score, so the histogram of a union of held-out slices is the
// sum of the slices' histograms, whatever the order or the cut (counts are
// integers). Bins are the top `key_bits` bits of a float's order-preserving
// bit pattern: sign, exponent and 11 mantissa bits, so a bin spans a
// relative width of at most 2^-11 of its scores (about 0.05%), over any
// range of scores, with no bounds to configure.
//
// Error bound: within a bin the histogram counts every (positive, negative)
// pair as a tie (1/2), where the exact AUC (ties also 1/2) counts 0, 1/2 or
// 1; so |auc() - exact AUC| <= tie_bound() = (sum over bins of positives *
// negatives) / 2 / (P * N), reported beside the figure. Scores that are
// exactly equal are ties in both. A histogram is a plain value: copy and
// merge it freely; not synchronised.

#include <caf/expected.hpp>
#include <cstdint>
#include <vector>

#include "models/span.hpp"

namespace keel {

// One nonempty bin: the examples whose score key is `key`.
struct score_bin {
  uint32_t key = 0;
  uint64_t positives = 0;
  uint64_t negatives = 0;
};

class score_histogram {
 public:
  static constexpr unsigned key_bits = 20;

  // The bin of `score`: monotone (a <= b gives key_of(a) <= key_of(b) for
  // non-NaN floats), below 2^key_bits.
  static uint32_t key_of(float score) noexcept;

  // The histogram of `scores` with `labels` (0 negative, anything else
  // positive), which must be as long as `scores` (else invalid_argument).
  static caf::expected<score_histogram> of(span<const float> scores, span<const uint8_t> labels);

  // A histogram from its bins (as carried on a wire): keys strictly
  // ascending and below 2^key_bits, each bin nonempty, or invalid_argument
  // naming the first bad bin.
  static caf::expected<score_histogram> from_bins(std::vector<score_bin> bins);

  // Adds `other`'s counts to this histogram's.
  void merge(const score_histogram& other);

  const std::vector<score_bin>& bins() const noexcept { return bins_; }
  uint64_t positives() const noexcept { return positives_; }
  uint64_t negatives() const noexcept { return negatives_; }

  // The AUC with every pair inside one bin counted 1/2; NaN when there are
  // no positives or no negatives. Exact in double arithmetic while P * N
  // stays below 2^52 (a few times 10^7 examples); beyond, rounded.
  double auc() const noexcept;
  // The bound on |auc() - exact AUC| (see the header comment); NaN with auc().
  double tie_bound() const noexcept;

 private:
  std::vector<score_bin> bins_;  // ascending keys, each bin nonempty
  uint64_t positives_ = 0;
  uint64_t negatives_ = 0;
};

// The exact AUC of `scores` (Mann-Whitney: the share of (positive,
// negative) pairs the scores order correctly, exact ties counted 1/2), by
// sorting; NaN scores are left out; NaN without both classes. The reference
// the histogram is tested against. `labels` as long as `scores` (else NaN).
double exact_auc(span<const float> scores, span<const uint8_t> labels);

}  // namespace keel
