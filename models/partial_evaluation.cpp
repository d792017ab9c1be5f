#include "models/partial_evaluation.hpp"

#include <cmath>

namespace keel {

void fixed_sum::add(double v) noexcept {
  if (!(v > 0))
    return;  // zero, negative (NaN is counted by the caller)
  if (v > cap)
    v = cap;
  add_units(static_cast<uint64_t>(std::llround(v / unit)));
}

void fixed_sum::add_units(uint64_t units) noexcept {
  low_ += units;
  if (low_ < units)
    ++high_;
}

void fixed_sum::merge(const fixed_sum& other) noexcept {
  add_units(other.low_);
  high_ += other.high_;
}

double fixed_sum::value() const noexcept {
  return (static_cast<double>(high_) * 18446744073709551616.0 + static_cast<double>(low_)) * unit;
}

fixed_sum fixed_sum::from_words(uint64_t high, uint64_t low) noexcept {
  fixed_sum s;
  s.high_ = high;
  s.low_ = low;
  return s;
}

void partial_evaluation::merge(const partial_evaluation& other) {
  examples += other.examples;
  correct += other.correct;
  non_finite += other.non_finite;
  loss_nats.merge(other.loss_nats);
  scores.merge(other.scores);
}

evaluation partial_evaluation::result() const {
  evaluation e;
  e.examples = examples;
  if (examples > 0) {
    const double n = static_cast<double>(examples);
    e.log_loss = non_finite > 0 ? std::nan("") : loss_nats.value() / n;
    e.accuracy = static_cast<double>(correct) / n;
  }
  e.metrics.push_back({"auc", scores.auc()});
  e.metrics.push_back({"auc_tie_bound", scores.tie_bound()});
  return e;
}

}  // namespace keel
