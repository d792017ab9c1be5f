#include "models/ctr_data.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "messages/errors.hpp"
#include "models/counter_rng.hpp"

namespace keel {

namespace {

// Stream tags: one per use of the seed (counter_rng.hpp).
constexpr uint64_t tag_row = 0x63747201;      // an example's own stream
constexpr uint64_t tag_field = 0x63747202;    // a field's key salt
constexpr uint64_t tag_numeric = 0x63747203;  // a numeric feature's law and weight
constexpr uint64_t tag_weight = 0x63747204;   // w(f, id)
constexpr uint64_t tag_factor = 0x63747205;   // v(f, id), four factors a word
constexpr uint64_t label_slot = 1000;         // the label's slot in a row's stream
constexpr uint64_t count_slot = 2000;         // numeric counts' slots (+ 2j, + 2j + 1)

constexpr double sqrt3 = 1.7320508075688772;

// A uniform of unit variance on [-sqrt 3, sqrt 3] from 16 bits.
double unit_variance16(uint64_t bits16) noexcept {
  return ((static_cast<double>(bits16) + 0.5) * (2.0 / 65536.0) - 1.0) * sqrt3;
}

caf::error bad(const std::string& field, const std::string& why) {
  return make_error(errc::invalid_argument, "ctr_config." + field + " " + why);
}

}  // namespace

caf::error validate(const ctr_config& c) {
  if (c.vocabulary < 1000 || c.vocabulary > (uint64_t{1} << 40))
    return bad("vocabulary", "= " + std::to_string(c.vocabulary) + " must be in [1000, 2^40]");
  if (c.train_examples == 0 || c.test_examples == 0 ||
      c.train_examples >= (uint64_t{1} << 62) - c.test_examples)
    return bad("train_examples/test_examples", "must be positive with a sum below 2^62");
  if (!(c.zipf_exponent >= 0.5 && c.zipf_exponent <= 2.0))
    return bad("zipf_exponent", "= " + std::to_string(c.zipf_exponent) + " must be in [0.5, 2]");
  if (c.fm_factors < 1 || c.fm_factors > 64)
    return bad("fm_factors", "= " + std::to_string(c.fm_factors) + " must be in [1, 64]");
  if (c.planted_factors > 16)
    return bad("planted_factors", "= " + std::to_string(c.planted_factors) + " must be at most 16");
  if (!(c.weight_scale >= 0) || !(c.factor_scale >= 0) || !(c.numeric_scale >= 0) ||
      !std::isfinite(c.weight_scale + c.factor_scale + c.numeric_scale))
    return bad("weight_scale/factor_scale/numeric_scale", "must be finite and non-negative");
  if (!(c.weight_half_rank > 0) || !std::isfinite(c.weight_half_rank))
    return bad("weight_half_rank", "must be positive and finite");
  if (!std::isfinite(c.true_bias))
    return bad("true_bias", "must be finite");
  return {};
}

ctr_data::ctr_data(const ctr_config& c) : config_(c), zipf_(c.vocabulary, c.zipf_exponent) {
  for (uint32_t f = 0; f < ctr_categorical_fields; ++f)
    field_salt_[f] = counter_hash(c.seed, tag_field, f);
  for (uint32_t j = 0; j < ctr_numeric_fields; ++j) {
    count_mean_[j] = 0.5 + 3.0 * unit_double(counter_hash(c.seed, tag_numeric, j, 0));
    count_sigma_[j] = 0.5 + unit_double(counter_hash(c.seed, tag_numeric, j, 1));
    numeric_weight_[j] =
        c.numeric_scale * unit_variance16(counter_hash(c.seed, tag_numeric, j, 2) >> 48);
  }
}

uint64_t ctr_data::key_of(uint32_t field, uint64_t id) const noexcept {
  return mix64(id ^ field_salt_[field]);  // mix64 is a bijection, so is this
}

// w(f, id), and v(f, id) into factors[0, planted_factors).
double ctr_data::id_terms(uint32_t field, uint64_t id, double* factors) const noexcept {
  const auto& c = config_;
  const double decay = 1.0 + static_cast<double>(id) / c.weight_half_rank;
  const double w = c.weight_scale / std::sqrt(decay) *
                   unit_variance16(counter_hash(c.seed, tag_weight, field, id) >> 48);
  const double v_scale = c.factor_scale / std::sqrt(std::sqrt(decay));
  uint64_t word = 0;
  for (uint32_t j = 0; j < c.planted_factors; ++j) {
    if (j % 4 == 0)
      word = counter_hash(c.seed, tag_factor + j / 4, field, id);
    factors[j] = v_scale * unit_variance16((word >> (16 * (j % 4))) & 0xffff);
  }
  return w;
}

void ctr_data::generate(uint64_t row, ctr_example& out) const {
  const auto& c = config_;
  const uint64_t stream = counter_hash(c.seed, tag_row, row);
  double margin = c.true_bias;
  for (uint32_t j = 0; j < ctr_numeric_fields; ++j) {
    const uint64_t h = counter_hash(stream, count_slot + 2 * j);
    double count = 0;
    if (unit_double(h) >= 1.0 / 3.0)
      count = std::floor(std::exp(count_mean_[j] + count_sigma_[j] *
                                                       normal_from(counter_hash(stream, count_slot + 2 * j + 1), h)));
    out.numeric[j] = static_cast<float>(std::log1p(count));
    margin += numeric_weight_[j] * out.numeric[j];
  }
  double sum[16] = {0}, squares = 0, v[16];
  for (uint32_t f = 0; f < ctr_categorical_fields; ++f) {
    uint64_t attempt = 0;
    const uint64_t id = zipf_.draw([&] { return unit_double(counter_hash(stream, f, attempt++)); }) - 1;
    out.ids[f] = id;
    out.keys[f] = key_of(f, id);
    margin += id_terms(f, id, v);
    for (uint32_t j = 0; j < c.planted_factors; ++j) {
      sum[j] += v[j];
      squares += v[j] * v[j];
    }
  }
  // The sum over pairs f < g of <v_f, v_g> is (|sum v|^2 - sum |v|^2) / 2.
  double pairs = -squares;
  for (uint32_t j = 0; j < c.planted_factors; ++j) pairs += sum[j] * sum[j];
  margin += 0.5 * pairs;
  out.planted_margin = margin;
  const double p = 1.0 / (1.0 + std::exp(-margin));
  out.label = unit_double(counter_hash(stream, label_slot)) < p ? 1 : 0;
}

partial_evaluation ctr_data::planted_evaluation(uint64_t first, uint64_t count) const {
  partial_evaluation part;
  std::vector<float> scores(count);
  std::vector<uint8_t> labels(count);
  ctr_example ex;
  for (uint64_t i = 0; i < count; ++i) {
    generate(first + i, ex);
    const double m = ex.planted_margin;
    part.loss_nats.add(softplus(ex.label ? -m : m));
    part.correct += (m > 0) == (ex.label == 1) ? 1 : 0;
    scores[i] = static_cast<float>(m);
    labels[i] = ex.label;
  }
  part.examples = count;
  part.scores = *score_histogram::of(scores, labels);  // equal sizes: cannot fail
  return part;
}

}  // namespace keel
