#include "models/sparse_lr.hpp"

#include <algorithm>
#include <cmath>

#include "messages/errors.hpp"

namespace keel {

namespace {

// The rows of the batch a scratch last generated, kept so that gradient()
// does not regenerate what sparse_keys() just made for the same batch.
struct sparse_lr_scratch : model_scratch {
  std::vector<uint64_t> batch;     // the batch the rows belong to
  std::vector<uint64_t> features;  // every row's keys, concatenated
  std::vector<uint32_t> row_end;   // end of each row in `features`
  std::vector<uint8_t> labels;
  std::vector<uint64_t> keys;    // the batch's sorted distinct keys
  std::vector<uint32_t> slots;   // index in `keys` of each feature
  std::vector<uint64_t> sorted;  // (key << 24 | feature position), sorted
  bool cached = false;
};

// Feature positions in a batch fit in the low bits of a sort key whose high
// bits are the sparse key (at most 2^26, see validate()), so one sort yields
// the distinct keys and every feature's slot without a search per feature.
constexpr unsigned position_bits = 24;

caf::error generate_batch(const sparse_rows& rows, span<const uint64_t> batch,
                          sparse_lr_scratch& s) {
  s.cached = false;
  s.features.clear();
  s.row_end.clear();
  s.labels.clear();
  for (uint64_t row : batch) {
    s.labels.push_back(static_cast<uint8_t>(rows.generate(row, s.features)));
    s.row_end.push_back(static_cast<uint32_t>(s.features.size()));
  }
  const size_t n = s.features.size();
  if (n >= (size_t{1} << position_bits))
    return make_error(errc::invalid_argument, "sparse-lr: a batch of " +
                                                  std::to_string(batch.size()) + " rows has " +
                                                  std::to_string(n) + " features, more than 2^24");
  s.sorted.resize(n);
  for (size_t i = 0; i < n; ++i) s.sorted[i] = (s.features[i] << position_bits) | i;
  std::sort(s.sorted.begin(), s.sorted.end());
  s.keys.clear();
  s.slots.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t key = s.sorted[i] >> position_bits;
    if (s.keys.empty() || s.keys.back() != key)
      s.keys.push_back(key);
    s.slots[s.sorted[i] & ((uint64_t{1} << position_bits) - 1)] =
        static_cast<uint32_t>(s.keys.size() - 1);
  }
  s.batch.assign(batch.begin(), batch.end());
  s.cached = true;
  return {};
}

bool same_batch(const sparse_lr_scratch& s, span<const uint64_t> batch) {
  return s.cached && s.batch.size() == batch.size() &&
         std::equal(batch.begin(), batch.end(), s.batch.begin());
}

}  // namespace

double softplus(double x) noexcept {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

sparse_lr::sparse_lr(const sparse_lr_config& c) : rows_(c) {
  layout_.add_dense("sparse_lr.bias", {1});
  layout_.set_sparse("sparse_lr.weight", c.keys);
}

caf::expected<std::shared_ptr<const sparse_lr>> sparse_lr::make(const sparse_lr_config& c) {
  if (auto err = validate(c))
    return err;
  auto m = std::make_shared<sparse_lr>(c);
  std::vector<uint64_t> keys;
  double loss = 0;
  uint64_t right = 0;
  for (uint64_t i = 0; i < c.test_rows; ++i) {
    keys.clear();
    double margin = 0;
    const int y = m->rows_.generate(c.train_rows + i, keys, &margin);
    loss += softplus(y ? -margin : margin);
    right += (margin > 0) == (y == 1) ? 1 : 0;
  }
  m->reference_.examples = c.test_rows;
  m->reference_.log_loss = loss / static_cast<double>(c.test_rows);
  m->reference_.accuracy = static_cast<double>(right) / static_cast<double>(c.test_rows);
  return std::shared_ptr<const sparse_lr>(std::move(m));
}

quality_target sparse_lr::target() const {
  return {
      std::nullopt, 1.05 * *reference_.log_loss,
      "within 5% of the ground truth's held-out log loss " + std::to_string(*reference_.log_loss), {}};
}

void sparse_lr::initial_dense(uint64_t, uint64_t, span<float> out) const {
  std::fill(out.begin(), out.end(), 0.0f);
}

std::unique_ptr<model_scratch> sparse_lr::make_scratch() const {
  return std::make_unique<sparse_lr_scratch>();
}

caf::error sparse_lr::do_sparse_keys(span<const uint64_t> batch, model_scratch& scratch,
                                     std::vector<uint64_t>& keys) const {
  auto s = own_scratch<sparse_lr_scratch>(scratch);
  if (!s)
    return std::move(s.error());
  if (!same_batch(**s, batch))
    if (auto err = generate_batch(rows_, batch, **s))
      return err;
  keys.assign((*s)->keys.begin(), (*s)->keys.end());
  return {};
}

caf::error sparse_lr::do_gradient(span<const uint64_t> batch, const parameter_view& params,
                                  model_scratch& scratch, gradient_buffer& out) const {
  auto sp = own_scratch<sparse_lr_scratch>(scratch);
  if (!sp)
    return std::move(sp.error());
  sparse_lr_scratch& s = **sp;
  if (!same_batch(s, batch))
    if (auto err = generate_batch(rows_, batch, s))
      return err;
  // The view normally holds exactly the keys sparse_keys() returned; a
  // superset (or another order of pulls) is mapped by binary search.
  const bool exact = params.sparse_keys.size() == s.keys.size() &&
                     std::equal(s.keys.begin(), s.keys.end(), params.sparse_keys.begin());
  if (!exact) {
    for (size_t i = 0; i < s.features.size(); ++i) {
      const auto* pos =
          std::lower_bound(params.sparse_keys.begin(), params.sparse_keys.end(), s.features[i]);
      if (pos == params.sparse_keys.end() || *pos != s.features[i])
        return make_error(errc::invalid_argument, "sparse-lr: the batch needs sparse key " +
                                                      std::to_string(s.features[i]) +
                                                      ", which the parameter_view lacks");
      s.slots[i] = static_cast<uint32_t>(pos - params.sparse_keys.begin());
    }
    s.cached = false;  // the slots now index the view, not s.keys
  }
  const float* w = params.sparse_values.data();
  const double bias = params.dense[0];
  out.dense.assign(1, 0.0f);
  out.sparse_keys.assign(params.sparse_keys.begin(), params.sparse_keys.end());
  out.sparse_values.assign(params.sparse_keys.size(), 0.0f);
  const double scale = 1.0 / static_cast<double>(batch.size());
  double loss = 0;
  double bias_grad = 0;
  uint32_t begin = 0;
  for (size_t r = 0; r < batch.size(); ++r) {
    const uint32_t end = s.row_end[r];
    double margin = bias;
    for (uint32_t f = begin; f < end; ++f) margin += w[s.slots[f]];
    const int y = s.labels[r];
    loss += softplus(y ? -margin : margin);
    // d loss / d margin = sigmoid(margin) - y; every active feature has x = 1.
    const double p = 1.0 / (1.0 + std::exp(-margin));
    const float g = static_cast<float>((p - y) * scale);
    for (uint32_t f = begin; f < end; ++f) out.sparse_values[s.slots[f]] += g;
    bias_grad += (p - y) * scale;
    begin = end;
  }
  out.dense[0] = static_cast<float>(bias_grad);
  out.loss = loss * scale;
  out.examples = static_cast<uint32_t>(batch.size());
  return {};
}

caf::expected<evaluation> sparse_lr::do_evaluate(const full_parameters& params,
                                                 model_scratch& scratch) const {
  auto sp = own_scratch<sparse_lr_scratch>(scratch);
  if (!sp)
    return std::move(sp.error());
  sparse_lr_scratch& s = **sp;
  s.cached = false;  // the feature buffer is reused below
  const auto& c = rows_.config();
  const double bias = params.dense[0];
  double loss = 0;
  uint64_t right = 0;
  for (uint64_t i = 0; i < c.test_rows; ++i) {
    s.features.clear();
    const int y = rows_.generate(c.train_rows + i, s.features);
    double margin = bias;
    for (uint64_t key : s.features) margin += params.sparse[key];
    loss += softplus(y ? -margin : margin);
    right += (margin > 0) == (y == 1) ? 1 : 0;
  }
  evaluation e;
  e.examples = c.test_rows;
  e.log_loss = loss / static_cast<double>(c.test_rows);
  e.accuracy = static_cast<double>(right) / static_cast<double>(c.test_rows);
  return e;
}

}  // namespace keel
