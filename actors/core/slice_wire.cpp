// partial_evaluation to and from its wire form; see slice_wire.hpp.
#include "actors/core/slice_wire.hpp"

#include <string>

#include "messages/errors.hpp"

namespace keel {

slice_score to_wire(test_slice slice, const partial_evaluation& part) {
  slice_score s;
  s.first = slice.first;
  s.count = slice.count;
  s.examples = part.examples;
  s.correct = part.correct;
  s.non_finite = part.non_finite;
  s.loss_high = part.loss_nats.high();
  s.loss_low = part.loss_nats.low();
  for (auto& b : part.scores.bins()) {
    s.bin_keys.push_back(b.key);
    s.bin_positives.push_back(b.positives);
    s.bin_negatives.push_back(b.negatives);
  }
  return s;
}

caf::expected<partial_evaluation> from_wire(const slice_score& s, test_slice slice) {
  auto where = "the score of slice [" + std::to_string(slice.first) + ", " +
               std::to_string(slice.first + slice.count) + ")";
  if (s.first != slice.first || s.count != slice.count)
    return make_error(errc::invalid_field, where + " answers slice [" + std::to_string(s.first) + ", " +
                                             std::to_string(s.first + s.count) + ")");
  if (s.examples > slice.count || s.correct > s.examples || s.non_finite > s.examples)
    return make_error(errc::invalid_field, where + " counts " + std::to_string(s.examples) + " examples, " +
                                             std::to_string(s.correct) + " correct, " +
                                             std::to_string(s.non_finite) + " non-finite");
  if (s.bin_positives.size() != s.bin_keys.size() || s.bin_negatives.size() != s.bin_keys.size())
    return make_error(errc::invalid_field, where + " has bins of unequal lengths");
  std::vector<score_bin> bins(s.bin_keys.size());
  for (size_t i = 0; i < bins.size(); ++i) bins[i] = {s.bin_keys[i], s.bin_positives[i], s.bin_negatives[i]};
  auto h = score_histogram::from_bins(std::move(bins));
  if (!h)
    return make_error(errc::invalid_field, where + ": " + describe(h.error()));
  partial_evaluation p;
  p.examples = s.examples;
  p.correct = s.correct;
  p.non_finite = s.non_finite;
  p.loss_nats = fixed_sum::from_words(s.loss_high, s.loss_low);
  p.scores = std::move(*h);
  return p;
}

}  // namespace keel
