#include "models/auc.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "messages/errors.hpp"

namespace keel {

namespace {

// A float's bits turned into an unsigned word with the floats' order: the
// sign bit flipped for non-negative values, every bit flipped for negative
// ones (IEEE 754 sign-magnitude to two's-complement-like order).
uint32_t ordered_bits(float score) noexcept {
  uint32_t b;
  std::memcpy(&b, &score, sizeof b);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

}  // namespace

uint32_t score_histogram::key_of(float score) noexcept {
  return ordered_bits(score) >> (32 - key_bits);
}

caf::expected<score_histogram> score_histogram::of(span<const float> scores,
                                                   span<const uint8_t> labels) {
  if (scores.size() != labels.size())
    return make_error(errc::invalid_argument,
                      "score_histogram::of: " + std::to_string(scores.size()) + " scores but " +
                          std::to_string(labels.size()) + " labels");
  // One sort of (key, label) words yields the bins in order.
  std::vector<uint32_t> words(scores.size());
  for (size_t i = 0; i < scores.size(); ++i)
    words[i] = (key_of(scores[i]) << 1) | (labels[i] ? 1u : 0u);
  std::sort(words.begin(), words.end());
  score_histogram h;
  for (uint32_t w : words) {
    const uint32_t key = w >> 1;
    if (h.bins_.empty() || h.bins_.back().key != key)
      h.bins_.push_back(score_bin{key, 0, 0});
    if (w & 1u) {
      ++h.bins_.back().positives;
      ++h.positives_;
    } else {
      ++h.bins_.back().negatives;
      ++h.negatives_;
    }
  }
  return h;
}

caf::expected<score_histogram> score_histogram::from_bins(std::vector<score_bin> bins) {
  score_histogram h;
  for (size_t i = 0; i < bins.size(); ++i) {
    const auto& b = bins[i];
    const bool ordered = i == 0 || bins[i - 1].key < b.key;
    if (b.key >= (1u << key_bits) || !ordered || b.positives + b.negatives == 0)
      return make_error(errc::invalid_argument,
                        "score histogram bin " + std::to_string(i) + " (key " +
                            std::to_string(b.key) +
                            ") is empty, out of range or not above the bin before it");
    h.positives_ += b.positives;
    h.negatives_ += b.negatives;
  }
  h.bins_ = std::move(bins);
  return h;
}

void score_histogram::merge(const score_histogram& other) {
  std::vector<score_bin> out;
  out.reserve(bins_.size() + other.bins_.size());
  auto a = bins_.begin();
  auto b = other.bins_.begin();
  while (a != bins_.end() || b != other.bins_.end()) {
    if (b == other.bins_.end() || (a != bins_.end() && a->key < b->key)) {
      out.push_back(*a++);
    } else if (a == bins_.end() || b->key < a->key) {
      out.push_back(*b++);
    } else {
      out.push_back(score_bin{a->key, a->positives + b->positives, a->negatives + b->negatives});
      ++a;
      ++b;
    }
  }
  bins_ = std::move(out);
  positives_ += other.positives_;
  negatives_ += other.negatives_;
}

double score_histogram::auc() const noexcept {
  if (positives_ == 0 || negatives_ == 0)
    return std::nan("");
  // In half pairs: 2 per correctly ordered pair, 1 per pair within a bin.
  double half_pairs = 0;
  double negatives_below = 0;
  for (const auto& b : bins_) {
    const double pos = static_cast<double>(b.positives);
    const double neg = static_cast<double>(b.negatives);
    half_pairs += 2 * pos * negatives_below + pos * neg;
    negatives_below += neg;
  }
  return half_pairs / (2.0 * static_cast<double>(positives_) * static_cast<double>(negatives_));
}

double score_histogram::tie_bound() const noexcept {
  if (positives_ == 0 || negatives_ == 0)
    return std::nan("");
  double tied = 0;
  for (const auto& b : bins_) tied += static_cast<double>(b.positives) * static_cast<double>(b.negatives);
  return tied / (2.0 * static_cast<double>(positives_) * static_cast<double>(negatives_));
}

double exact_auc(span<const float> scores, span<const uint8_t> labels) {
  if (scores.size() != labels.size())
    return std::nan("");
  std::vector<std::pair<float, uint8_t>> v;
  v.reserve(scores.size());
  for (size_t i = 0; i < scores.size(); ++i)
    if (!std::isnan(scores[i]))
      v.emplace_back(scores[i], labels[i] ? uint8_t{1} : uint8_t{0});
  std::sort(v.begin(), v.end());
  double half_pairs = 0, negatives_below = 0, positives = 0;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    double pos = 0, neg = 0;
    for (; j < v.size() && v[j].first == v[i].first; ++j) (v[j].second ? pos : neg) += 1;
    half_pairs += 2 * pos * negatives_below + pos * neg;
    negatives_below += neg;
    positives += pos;
    i = j;
  }
  if (positives == 0 || negatives_below == 0)
    return std::nan("");
  return half_pairs / (2.0 * positives * negatives_below);
}

}  // namespace keel
