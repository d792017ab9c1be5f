#include "models/ctr_data.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "messages/errors.hpp"
#include "models/counter_rng.hpp"
#include "models/zipf_sampler.hpp"

using namespace keel;

namespace {

bool same_example(const ctr_example& a, const ctr_example& b) {
  return a.numeric == b.numeric && a.ids == b.ids && a.keys == b.keys && a.label == b.label &&
         std::memcmp(&a.planted_margin, &b.planted_margin, sizeof(double)) == 0;
}

ctr_config small_config() {
  ctr_config c;
  c.vocabulary = 100'000;
  c.train_examples = 20'000;
  c.test_examples = 5'000;
  return c;
}

}  // namespace

TEST_CASE("a click-log example is the same from (seed, row) on any thread, in any order") {
  ctr_config c;  // the default 10^7 IDs a field
  ctr_data data(c);
  const uint64_t n = 2000;
  std::vector<ctr_example> here(n);
  for (uint64_t r = 0; r < n; ++r) data.generate(r * 104729, here[r]);
  std::vector<ctr_example> there(n);
  std::thread other([&] {
    ctr_data own(c);  // another generator too
    for (uint64_t r = n; r-- > 0;) own.generate(r * 104729, there[r]);
  });
  other.join();
  uint64_t same = 0;
  for (uint64_t r = 0; r < n; ++r) same += same_example(here[r], there[r]) ? 1 : 0;
  CHECK(same == n);
  ctr_config other_seed = c;
  other_seed.seed = 2;
  ctr_example a, b;
  data.generate(7, a);
  ctr_data(other_seed).generate(7, b);
  CHECK(a.keys != b.keys);
}

TEST_CASE("a click-log example has 13 log counts, 26 IDs in the vocabulary and their keys") {
  ctr_config c = small_config();
  ctr_data data(c);
  ctr_example ex;
  uint64_t clicks = 0, zero_counts = 0;
  for (uint64_t r = 0; r < 5000; ++r) {
    data.generate(r, ex);
    clicks += ex.label;
    for (float v : ex.numeric) {
      CHECK(v >= 0.0f);
      zero_counts += v == 0.0f ? 1 : 0;
    }
    for (uint32_t f = 0; f < ctr_categorical_fields; ++f) {
      CHECK(ex.ids[f] < c.vocabulary);
      CHECK(ex.keys[f] == data.key_of(f, ex.ids[f]));
    }
  }
  // The defaults plant a click rate near Criteo's (about 25%).
  CHECK(clicks / 5000.0 == doctest::Approx(0.25).epsilon(0.15));
  // A third of the counts are zero (missing), a few more round down to 0.
  CHECK(zero_counts / (5000.0 * 13) == doctest::Approx(0.36).epsilon(0.1));
  // Keys of one field are a bijection of its IDs; fields have their own keys.
  CHECK(data.key_of(0, 5) != data.key_of(0, 6));
  CHECK(data.key_of(0, 5) != data.key_of(1, 5));
}

TEST_CASE("Zipf draws follow P(k) ~ k^-s within sampling error, for s below, at and above 1") {
  for (double s : {0.7, 1.0, 1.05, 1.5}) {
    CAPTURE(s);
    const uint64_t n = 1'000'000;
    zipf_sampler z(n, s);
    const uint64_t draws = 400'000;
    std::vector<uint64_t> band_counts(8, 0);  // ranks 1, 2, 3..10, 11..100, ..., 10^5+1..10^6
    auto band = [](uint64_t k) {
      if (k <= 2)
        return static_cast<size_t>(k - 1);
      size_t b = 2;
      for (uint64_t top = 10; k > top; top *= 10) ++b;
      return b;
    };
    for (uint64_t i = 0; i < draws; ++i) {
      uint64_t attempt = 0;
      const uint64_t k = z.draw([&] { return unit_double(counter_hash(11, i, attempt++)); });
      REQUIRE(k >= 1);
      REQUIRE(k <= n);
      ++band_counts[band(k)];
    }
    // The law's mass of each band, from P(1) and the ratios k^-s.
    const double p1 = z.probability(1);
    std::vector<double> mass(8, 0.0);
    for (uint64_t k = 1; k <= n; ++k) mass[band(k)] += p1 * std::pow(static_cast<double>(k), -s);
    for (size_t b = 0; b < mass.size(); ++b) {
      CAPTURE(b);
      const double expected = mass[b] * draws;
      const double sigma = std::sqrt(expected * (1 - mass[b]));
      CHECK(std::abs(static_cast<double>(band_counts[b]) - expected) < 4.5 * sigma + 1);
    }
  }
}

TEST_CASE("the IDs of every field follow the configured Zipf law") {
  ctr_config c = small_config();
  c.zipf_exponent = 1.2;
  ctr_data data(c);
  const double p1 = data.zipf().probability(1), p2 = data.zipf().probability(2);
  uint64_t first = 0, second = 0, total = 0;
  ctr_example ex;
  for (uint64_t r = 0; r < 4000; ++r) {
    data.generate(r, ex);
    for (uint64_t id : ex.ids) {
      first += id == 0 ? 1 : 0;
      second += id == 1 ? 1 : 0;
      ++total;
    }
  }
  const double t = static_cast<double>(total);
  CHECK(std::abs(first - p1 * t) < 4.5 * std::sqrt(p1 * t));
  CHECK(std::abs(second - p2 * t) < 4.5 * std::sqrt(p2 * t));
}

TEST_CASE("the planted model's log loss is the Bayes log loss: no other margin does better") {
  ctr_config c = small_config();
  ctr_data data(c);
  auto planted = data.planted_evaluation(c.train_examples, c.test_examples).result();
  // Shrinking or stretching the planted margins, or predicting the base rate,
  // scores worse in expectation; on 5000 rows by a clear margin.
  auto scaled = [&](double a) {
    double loss = 0;
    ctr_example ex;
    for (uint64_t i = 0; i < c.test_examples; ++i) {
      data.generate(c.train_examples + i, ex);
      const double m = a * ex.planted_margin;
      loss += softplus(ex.label ? -m : m);
    }
    return loss / static_cast<double>(c.test_examples);
  };
  CHECK(*planted.log_loss == doctest::Approx(scaled(1.0)).epsilon(1e-9));
  CHECK(*planted.log_loss < scaled(0.7));
  CHECK(*planted.log_loss < scaled(1.4));
  CHECK(*planted.metric("auc") > 0.75);
}

TEST_CASE("a bad click-log config is refused naming the field") {
  auto text = [](const ctr_config& c) { return describe(validate(c)); };
  ctr_config c;
  CHECK(!validate(c));
  c.vocabulary = 10;
  CHECK(text(c).find("vocabulary") != std::string::npos);
  c = {};
  c.zipf_exponent = 0.1;
  CHECK(text(c).find("zipf_exponent") != std::string::npos);
  c = {};
  c.test_examples = 0;
  CHECK(text(c).find("test_examples") != std::string::npos);
  c = {};
  c.fm_factors = 0;
  CHECK(text(c).find("fm_factors") != std::string::npos);
  c = {};
  c.weight_half_rank = 0;
  CHECK(text(c).find("weight_half_rank") != std::string::npos);
}
