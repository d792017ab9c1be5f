#include "models/auc.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "models/counter_rng.hpp"
#include "models/partial_evaluation.hpp"

using namespace keel;

namespace {

// Scores of a weak scorer: positives shifted up by 0.6 standard deviations,
// with a share of exactly tied scores (rounded to 1/64) to exercise ties.
void scored_examples(uint64_t n, std::vector<float>& scores, std::vector<uint8_t>& labels) {
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t y = counter_hash(5, i, 1) % 4 == 0 ? 1 : 0;
    double s = normal_from(counter_hash(5, i, 2), counter_hash(5, i, 3)) + (y ? 0.6 : 0.0);
    if (i % 5 == 0)
      s = std::round(s * 64) / 64;
    scores.push_back(static_cast<float>(s));
    labels.push_back(y);
  }
}

}  // namespace

TEST_CASE("histograms of slices merged in any order equal the histogram of the whole") {
  std::vector<float> scores;
  std::vector<uint8_t> labels;
  scored_examples(20000, scores, labels);
  auto whole = score_histogram::of(scores, labels);
  REQUIRE(whole);
  // Uneven slices, merged back to front.
  const std::vector<size_t> cuts{0, 1, 777, 5000, 5001, 13000, 20000};
  score_histogram merged;
  for (size_t c = cuts.size() - 1; c-- > 0;) {
    const size_t a = cuts[c], b = cuts[c + 1];
    auto part = score_histogram::of(span<const float>(scores.data() + a, b - a),
                                    span<const uint8_t>(labels.data() + a, b - a));
    REQUIRE(part);
    merged.merge(*part);
  }
  REQUIRE(merged.bins().size() == whole->bins().size());
  for (size_t i = 0; i < merged.bins().size(); ++i) {
    CHECK(merged.bins()[i].key == whole->bins()[i].key);
    CHECK(merged.bins()[i].positives == whole->bins()[i].positives);
    CHECK(merged.bins()[i].negatives == whole->bins()[i].negatives);
  }
  CHECK(merged.auc() == whole->auc());
  CHECK(merged.tie_bound() == whole->tie_bound());
}

TEST_CASE("the histogram's AUC is within its tie bound of the exact AUC") {
  std::vector<float> scores;
  std::vector<uint8_t> labels;
  scored_examples(50000, scores, labels);
  auto h = score_histogram::of(scores, labels);
  REQUIRE(h);
  const double exact = exact_auc(scores, labels);
  // A 0.6-sigma shift gives an AUC of Phi(0.6 / sqrt 2), about 0.664.
  CHECK(exact == doctest::Approx(0.664).epsilon(0.02));
  CHECK(std::abs(h->auc() - exact) <= h->tie_bound());
  CHECK(h->tie_bound() < 1e-3);
  // Exactly tied scores are ties in both: a scorer that says the same for
  // everyone has AUC 1/2 and the histogram knows it.
  std::vector<float> same(labels.size(), 0.25f);
  auto flat = score_histogram::of(same, labels);
  REQUIRE(flat);
  CHECK(flat->auc() == 0.5);
  CHECK(exact_auc(same, labels) == 0.5);
}

TEST_CASE("score keys preserve the order of floats, negatives and zeros included") {
  const std::vector<float> ascending{-1e30f, -3.5f, -1.0f, -1e-20f, 0.0f, 1e-20f, 0.75f, 1.0f, 2.0f,
                                     1e30f};
  for (size_t i = 1; i < ascending.size(); ++i)
    CHECK(score_histogram::key_of(ascending[i - 1]) < score_histogram::key_of(ascending[i]));
  CHECK(score_histogram::key_of(-0.0f) <= score_histogram::key_of(0.0f));
  CHECK(score_histogram::key_of(1e30f) < (1u << score_histogram::key_bits));
}

TEST_CASE("a histogram from bad bins or mismatched labels is refused with a named error") {
  CHECK(!score_histogram::from_bins({{5, 1, 0}, {5, 0, 1}}));
  CHECK(!score_histogram::from_bins({{7, 1, 0}, {3, 0, 1}}));
  CHECK(!score_histogram::from_bins({{1u << score_histogram::key_bits, 1, 0}}));
  CHECK(!score_histogram::from_bins({{2, 0, 0}}));
  auto good = score_histogram::from_bins({{2, 1, 3}, {9, 2, 0}});
  REQUIRE(good);
  CHECK(good->positives() == 3);
  // The 2 positives of bin 9 beat all 3 negatives; bin 2's pairs are ties.
  CHECK(good->auc() == doctest::Approx((2 * 3 + 0.5 * 1 * 3) / 9.0));
  CHECK(good->tie_bound() == doctest::Approx(0.5 * 3 / 9.0));
  std::vector<float> s{1, 2};
  std::vector<uint8_t> l{1};
  CHECK(!score_histogram::of(s, l));
}

TEST_CASE("partial evaluations merge to the same bits in any order") {
  std::vector<double> losses;
  for (uint64_t i = 0; i < 10000; ++i)
    losses.push_back(-std::log(open_unit_double(counter_hash(9, i))));
  fixed_sum forward, backward, halves_a, halves_b;
  for (double v : losses) forward.add(v);
  for (size_t i = losses.size(); i-- > 0;) backward.add(losses[i]);
  for (size_t i = 0; i < losses.size(); ++i) (i % 2 ? halves_a : halves_b).add(losses[i]);
  halves_b.merge(halves_a);
  CHECK(forward == backward);
  CHECK(forward == halves_b);
  double plain = 0;
  for (double v : losses) plain += v;
  CHECK(forward.value() == doctest::Approx(plain).epsilon(1e-12));
  // Carries between the words: a sum past 2^64 units (2^32 nats).
  fixed_sum big;
  for (int i = 0; i < 4; ++i) big.add(fixed_sum::cap);
  CHECK(big.high() == 2);
  CHECK(big.value() == 4 * fixed_sum::cap);

  partial_evaluation a, b;
  a.examples = 3;
  a.correct = 2;
  a.loss_nats.add(1.5);
  b.examples = 1;
  b.correct = 1;
  b.non_finite = 1;
  a.merge(b);
  auto e = a.result();
  CHECK(e.examples == 4);
  CHECK(*e.accuracy == 0.75);
  CHECK(std::isnan(*e.log_loss));
  CHECK(std::isnan(*e.metric("auc")));
}
