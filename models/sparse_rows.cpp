#include "models/sparse_rows.hpp"

#include <algorithm>
#include <cmath>

#include "messages/errors.hpp"
#include "models/counter_rng.hpp"

namespace keel {

namespace {

// Stream tags: one per use of the seed, so no two uses share numbers.
constexpr uint64_t count_stream = 0x7370726f77636e74ULL;    // row feature counts
constexpr uint64_t feature_stream = 0x7370726f77666561ULL;  // feature draws
constexpr uint64_t label_stream = 0x7370726f776c6162ULL;    // label coin flips
constexpr uint64_t weight_stream = 0x7370726f77776774ULL;   // z(key) of w*
constexpr uint64_t scatter_stream = 0x7370726f77736374ULL;  // rank -> key permutation

// A draw that repeats a key already in the row is redrawn; a row gives up
// after this many draws per wanted feature (reachable only with a very skewed
// exponent), keeping the distinct keys it has.
constexpr uint64_t draws_per_feature = 64;

constexpr uint32_t max_row_features = 1024;

// Ranks whose key and weight are tabulated (see the header).
constexpr uint64_t head_ranks = uint64_t{1} << 16;

// The value at index i of the SplitMix64 sequence seeded with `stream`: one
// mix per number, where counter_hash would take four (this is the hot loop).
inline uint64_t splitmix_at(uint64_t stream, uint64_t i) {
  return mix64(stream + i * 0x9e3779b97f4a7c15ULL);
}

bool near_one(double s) {
  return std::abs(s - 1.0) < 1e-9;
}

}  // namespace

caf::error validate(const sparse_lr_config& c) {
  auto bad = [](const std::string& what) { return make_error(errc::invalid_argument, what); };
  if (c.min_features < 1 || c.min_features > c.max_features || c.max_features > max_row_features)
    return bad("sparse_lr_config: need 1 <= min_features <= max_features <= 1024, got " +
               std::to_string(c.min_features) + " and " + std::to_string(c.max_features));
  if (c.keys < 4 * uint64_t{c.max_features} || c.keys > (uint64_t{1} << 26))
    return bad("sparse_lr_config.keys " + std::to_string(c.keys) +
               " must be at least 4 * max_features and at most 2^26");
  if (c.train_rows == 0 || c.test_rows == 0)
    return bad("sparse_lr_config: train_rows and test_rows must be positive");
  if (!(c.zipf_exponent >= 0.5 && c.zipf_exponent <= 1.5))
    return bad("sparse_lr_config.zipf_exponent " + std::to_string(c.zipf_exponent) +
               " is outside [0.5, 1.5]");
  if (!(c.weight_scale > 0) || !(c.weight_half_rank > 0) || !std::isfinite(c.true_bias))
    return bad("sparse_lr_config: weight_scale and weight_half_rank must be positive");
  return {};
}

sparse_rows::sparse_rows(const sparse_lr_config& c)
    : config_(c),
      scatter_(c.keys, counter_hash(c.seed, scatter_stream)),
      feature_key_(counter_hash(c.seed, feature_stream)),
      weight_key_(counter_hash(c.seed, weight_stream)) {
  const double top = static_cast<double>(c.keys) + 1.0;
  log_top_ = std::log(top);
  top_pow_ = std::pow(top, 1.0 - c.zipf_exponent) - 1.0;
  head_keys_.resize(std::min<uint64_t>(c.keys, head_ranks));
  head_weights_.resize(head_keys_.size());
  for (uint64_t rank = 0; rank < head_keys_.size(); ++rank) {
    const uint64_t key = scatter_(rank);
    head_keys_[rank] = static_cast<uint32_t>(key);
    head_weights_[rank] = weight_of(key, rank);
  }
}

float sparse_rows::weight_of(uint64_t key, uint64_t rank) const noexcept {
  // z is uniform on [-sqrt(3), sqrt(3)]: unit variance from one hash.
  const double z = (2.0 * unit_double(splitmix_at(weight_key_, key)) - 1.0) * 1.7320508075688772;
  return static_cast<float>(config_.weight_scale * z /
                            std::sqrt(1.0 + static_cast<double>(rank) / config_.weight_half_rank));
}

double sparse_rows::true_weight(uint64_t key) const noexcept {
  return weight_of(key, rank_of_key(key));
}

double sparse_rows::cdf(double x) const noexcept {
  if (near_one(config_.zipf_exponent))
    return std::log(x) / log_top_;
  return (std::pow(x, 1.0 - config_.zipf_exponent) - 1.0) / top_pow_;
}

double sparse_rows::rank_probability(uint64_t rank) const noexcept {
  if (rank >= config_.keys)
    return 0.0;
  const double r = static_cast<double>(rank);
  return cdf(r + 2.0) - cdf(r + 1.0);
}

uint64_t sparse_rows::draw_rank(uint64_t row_key, uint64_t draw) const noexcept {
  const double u = unit_double(splitmix_at(row_key, draw));
  // Inverse of the continuous CDF above.
  const double x = near_one(config_.zipf_exponent)
                       ? std::exp(u * log_top_)
                       : std::pow(1.0 + u * top_pow_, 1.0 / (1.0 - config_.zipf_exponent));
  const double rank = std::floor(x) - 1.0;
  if (!(rank > 0.0))
    return 0;
  return std::min(static_cast<uint64_t>(rank), config_.keys - 1);
}

uint32_t sparse_rows::feature_count(uint64_t row) const noexcept {
  const uint64_t span = uint64_t{config_.max_features} - config_.min_features + 1;
  return config_.min_features +
         static_cast<uint32_t>(counter_hash(config_.seed, count_stream, row) % span);
}

int sparse_rows::generate(uint64_t row, std::vector<uint64_t>& keys, double* true_margin) const {
  const uint32_t wanted = feature_count(row);
  // Ranks already in the row, in an open-addressing set of at least twice
  // the row's size (0 marks a free slot, so rank r is stored as r + 1).
  uint32_t seen[4 * max_row_features];
  uint32_t mask = 1;
  while (mask < 2 * wanted) mask <<= 1;
  std::fill(seen, seen + mask, 0u);
  mask -= 1;
  const uint64_t max_draws = draws_per_feature * wanted;
  const uint64_t row_key = mix64(feature_key_ ^ row);
  double margin = config_.true_bias;
  uint32_t have = 0;
  for (uint64_t draw = 0; draw < max_draws && have < wanted; ++draw) {
    const uint64_t rank = draw_rank(row_key, draw);
    uint32_t slot = static_cast<uint32_t>(mix64(rank)) & mask;
    while (seen[slot] != 0 && seen[slot] != rank + 1) slot = (slot + 1) & mask;
    if (seen[slot] != 0)
      continue;  // a repeat: draw again
    seen[slot] = static_cast<uint32_t>(rank + 1);
    if (rank < head_keys_.size()) {
      keys.push_back(head_keys_[rank]);
      margin += head_weights_[rank];
    } else {
      const uint64_t key = scatter_(rank);
      keys.push_back(key);
      margin += weight_of(key, rank);
    }
    ++have;
  }
  if (true_margin)
    *true_margin = margin;
  const double p = 1.0 / (1.0 + std::exp(-margin));
  return unit_double(counter_hash(config_.seed, label_stream, row)) < p ? 1 : 0;
}

}  // namespace keel
