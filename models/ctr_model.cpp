#include "models/ctr_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "messages/errors.hpp"
#include "models/counter_rng.hpp"

namespace keel {

namespace {

constexpr uint32_t fields = ctr_categorical_fields;
constexpr uint32_t bias_key = ctr_numeric_fields;  // dense keys: numeric [0, 13), bias 13
constexpr uint64_t tag_initial_row = 0x63747210;
constexpr double initial_factor_scale = 0.01;

// The examples of the batch or slice a scratch last generated, the distinct
// keys of each field among them, and each feature's row in the view.
struct ctr_scratch : model_scratch {
  std::vector<uint64_t> rows;  // the data rows `examples` were generated from
  bool cached = false;
  std::vector<ctr_example> examples;
  table_key_lists keys;            // per field: the distinct keys, ascending
  std::vector<uint32_t> slots;     // example e, field f: index of its key in keys[f]
  std::vector<uint32_t> bound;     // the same, as an index into the view's keys[f]
  std::vector<std::pair<uint64_t, uint32_t>> sorted;  // (key, example) of one field
  std::vector<double> sum;         // sum over fields of one example's factors
  std::vector<const float*> row_of;  // one example's row in each field
};

// Generates the data rows `rows` into s (unless it holds them) and finds
// each field's distinct keys and every feature's slot among them.
void prepare(const ctr_data& data, span<const uint64_t> rows, ctr_scratch& s) {
  if (s.cached && s.rows.size() == rows.size() &&
      std::equal(rows.begin(), rows.end(), s.rows.begin()))
    return;
  const size_t n = rows.size();
  s.examples.resize(n);
  for (size_t e = 0; e < n; ++e) data.generate(rows[e], s.examples[e]);
  s.keys.resize(fields);
  s.slots.resize(n * fields);
  for (uint32_t f = 0; f < fields; ++f) {
    s.sorted.resize(n);
    for (size_t e = 0; e < n; ++e) s.sorted[e] = {s.examples[e].keys[f], static_cast<uint32_t>(e)};
    std::sort(s.sorted.begin(), s.sorted.end());
    auto& keys = s.keys[f];
    keys.clear();
    for (const auto& [key, e] : s.sorted) {
      if (keys.empty() || keys.back() != key)
        keys.push_back(key);
      s.slots[e * fields + f] = static_cast<uint32_t>(keys.size() - 1);
    }
  }
  s.rows.assign(rows.begin(), rows.end());
  s.cached = true;
}

// Maps every feature to its row in `params`: the slots as they are when the
// view holds exactly the prepared keys, else by binary search. Fails naming
// a key the view lacks.
caf::error bind(const ctr_model& m, const parameter_view& params, ctr_scratch& s) {
  const size_t n = s.examples.size();
  s.bound.resize(n * fields);
  for (uint32_t f = 0; f < fields; ++f) {
    const auto& want = s.keys[f];
    const auto& have = params.tables[f].keys;
    if (have.size() == want.size() && std::equal(want.begin(), want.end(), have.begin())) {
      for (size_t e = 0; e < n; ++e) s.bound[e * fields + f] = s.slots[e * fields + f];
      continue;
    }
    for (size_t e = 0; e < n; ++e) {
      const uint64_t key = s.examples[e].keys[f];
      const auto* pos = std::lower_bound(have.begin(), have.end(), key);
      if (pos == have.end() || *pos != key)
        return make_error(errc::invalid_argument,
                          m.name() + ": the examples need key " + std::to_string(key) +
                              " of table " + m.layout().tables()[f].name +
                              ", which the parameter_view lacks");
      s.bound[e * fields + f] = static_cast<uint32_t>(pos - have.begin());
    }
  }
  return {};
}

// The model's logit for example e of the scratch; leaves the rows it read
// in s.row_of and (for an FM) the sum of its factors in s.sum.
double margin(const ctr_example& ex, size_t e, const parameter_view& params, uint32_t k,
              ctr_scratch& s) {
  const uint32_t d = 1 + k;
  double m = params.dense[bias_key];
  for (uint32_t j = 0; j < ctr_numeric_fields; ++j) m += double{params.dense[j]} * ex.numeric[j];
  s.row_of.resize(fields);
  for (uint32_t f = 0; f < fields; ++f) {
    const float* row = params.tables[f].rows.data() + size_t{s.bound[e * fields + f]} * d;
    s.row_of[f] = row;
    m += row[0];
  }
  if (k == 0)
    return m;
  s.sum.assign(k, 0.0);
  double squares = 0;
  for (uint32_t f = 0; f < fields; ++f) {
    const float* v = s.row_of[f] + 1;
    for (uint32_t i = 0; i < k; ++i) {
      s.sum[i] += v[i];
      squares += double{v[i]} * v[i];
    }
  }
  double pairs = -squares;
  for (uint32_t i = 0; i < k; ++i) pairs += s.sum[i] * s.sum[i];
  return m + 0.5 * pairs;
}

// The plain trainer's held-out figures on the default ctr_config with
// ctr_plain_lr and ctr_plain_batch (tests/models/ctr_slow_test.cpp checks
// them; plain_trainer.hpp lists them).
struct plain_figures {
  double log_loss;
  double auc;
};
constexpr plain_figures ctr_lr_plain{0.4628, 0.7788};
constexpr plain_figures ctr_fm_plain{0.4635, 0.7779};

bool same_config(const ctr_config& a, const ctr_config& b) {
  return a.seed == b.seed && a.vocabulary == b.vocabulary &&
         a.train_examples == b.train_examples && a.test_examples == b.test_examples &&
         a.zipf_exponent == b.zipf_exponent && a.fm_factors == b.fm_factors &&
         a.planted_factors == b.planted_factors && a.weight_scale == b.weight_scale &&
         a.factor_scale == b.factor_scale && a.weight_half_rank == b.weight_half_rank &&
         a.numeric_scale == b.numeric_scale && a.true_bias == b.true_bias;
}

}  // namespace

float ctr_plain_lr(uint32_t) noexcept { return 1.0f; }

ctr_model::ctr_model(const ctr_config& c, uint32_t factors) : data_(c), factors_(factors) {
  const std::string prefix = factors == 0 ? "ctr_lr" : "ctr_fm";
  layout_.add_dense(prefix + ".numeric", {ctr_numeric_fields});
  layout_.add_dense(prefix + ".bias", {1});
  for (uint32_t f = 0; f < fields; ++f)
    layout_.add_table(prefix + ".c" + std::to_string(f + 1), 1 + factors);
}

caf::expected<std::shared_ptr<const ctr_model>> ctr_model::make(const ctr_config& c,
                                                                uint32_t factors) {
  if (auto err = validate(c))
    return err;
  if (factors > 64)
    return make_error(errc::invalid_argument,
                      "ctr_model: " + std::to_string(factors) + " factors, at most 64");
  auto m = std::make_shared<ctr_model>(c, factors);
  auto part = m->data_.planted_evaluation(c.train_examples, c.test_examples);
  m->planted_ = part.result();
  m->base_rate_ =
      static_cast<double>(part.scores.positives()) / static_cast<double>(part.examples);
  return std::shared_ptr<const ctr_model>(std::move(m));
}

double ctr_model::base_entropy() const noexcept {
  const double p = base_rate_;
  return p <= 0 || p >= 1 ? 0.0 : -(p * std::log(p) + (1 - p) * std::log1p(-p));
}

void ctr_model::initial_dense(uint64_t, uint64_t, span<float> out) const {
  std::fill(out.begin(), out.end(), 0.0f);
}

void ctr_model::do_initial_rows(uint64_t seed, uint32_t table, span<const uint64_t> keys,
                                span<float> out) const {
  const uint32_t d = row_dim();
  for (size_t r = 0; r < keys.size(); ++r) {
    float* row = out.data() + r * d;
    row[0] = 0.0f;
    for (uint32_t i = 1; i < d; ++i) {
      const double z = unit_double(counter_hash(seed, tag_initial_row + table, keys[r], i));
      row[i] = static_cast<float>(initial_factor_scale * (2.0 * z - 1.0) * 1.7320508075688772);
    }
  }
}

std::unique_ptr<model_scratch> ctr_model::make_scratch() const {
  return std::make_unique<ctr_scratch>();
}

caf::error ctr_model::do_table_keys(span<const uint64_t> batch, model_scratch& scratch,
                                    table_key_lists& keys) const {
  auto s = own_scratch<ctr_scratch>(scratch);
  if (!s)
    return std::move(s.error());
  prepare(data_, batch, **s);
  keys = (*s)->keys;
  return {};
}

caf::error ctr_model::do_gradient(span<const uint64_t> batch, const parameter_view& params,
                                  model_scratch& scratch, gradient_buffer& out) const {
  auto sp = own_scratch<ctr_scratch>(scratch);
  if (!sp)
    return std::move(sp.error());
  ctr_scratch& s = **sp;
  prepare(data_, batch, s);
  if (auto err = bind(*this, params, s))
    return err;
  const uint32_t k = factors_, d = 1 + k;
  out.tables.resize(fields);
  for (uint32_t f = 0; f < fields; ++f) {
    const auto& keys = params.tables[f].keys;
    out.tables[f].keys.assign(keys.begin(), keys.end());
    out.tables[f].rows.assign(keys.size() * d, 0.0f);
  }
  out.sparse_keys.clear();
  out.sparse_values.clear();
  double dense[ctr_numeric_fields + 1] = {0};
  const double scale = 1.0 / static_cast<double>(batch.size());
  double loss = 0;
  for (size_t e = 0; e < s.examples.size(); ++e) {
    const auto& ex = s.examples[e];
    const double m = margin(ex, e, params, k, s);
    loss += softplus(ex.label ? -m : m);
    // d loss / d margin = sigmoid(m) - y.
    const double g = (1.0 / (1.0 + std::exp(-m)) - ex.label) * scale;
    for (uint32_t j = 0; j < ctr_numeric_fields; ++j) dense[j] += g * ex.numeric[j];
    dense[bias_key] += g;
    for (uint32_t f = 0; f < fields; ++f) {
      float* grad = out.tables[f].rows.data() + size_t{s.bound[e * fields + f]} * d;
      grad[0] += static_cast<float>(g);
      const float* v = s.row_of[f] + 1;
      // d pairs / d v_f = (sum of v) - v_f.
      for (uint32_t i = 0; i < k; ++i) grad[1 + i] += static_cast<float>(g * (s.sum[i] - v[i]));
    }
  }
  out.dense.assign(std::begin(dense), std::end(dense));
  out.loss = loss * scale;
  out.examples = static_cast<uint32_t>(batch.size());
  return {};
}

caf::expected<evaluation> ctr_model::do_evaluate(const full_parameters&, model_scratch&) const {
  return make_error(errc::invalid_argument,
                    name() + " keeps its rows in embedding tables, which full_parameters "
                             "does not carry: score it by slices (test_keys, evaluate_slice)");
}

caf::error ctr_model::do_test_keys(const test_slice& slice, model_scratch& scratch,
                                   std::vector<uint64_t>& sparse_keys,
                                   table_key_lists& table_keys) const {
  auto s = own_scratch<ctr_scratch>(scratch);
  if (!s)
    return std::move(s.error());
  std::vector<uint64_t> rows(slice.count);
  for (uint64_t i = 0; i < slice.count; ++i) rows[i] = num_train_examples() + slice.first + i;
  prepare(data_, rows, **s);
  sparse_keys.clear();
  table_keys = (*s)->keys;
  return {};
}

caf::expected<partial_evaluation> ctr_model::do_evaluate_slice(const test_slice& slice,
                                                               const parameter_view& params,
                                                               model_scratch& scratch) const {
  auto sp = own_scratch<ctr_scratch>(scratch);
  if (!sp)
    return std::move(sp.error());
  ctr_scratch& s = **sp;
  std::vector<uint64_t> rows(slice.count);
  for (uint64_t i = 0; i < slice.count; ++i) rows[i] = num_train_examples() + slice.first + i;
  prepare(data_, rows, s);
  if (auto err = bind(*this, params, s))
    return err;
  partial_evaluation part;
  std::vector<float> scores(slice.count);
  std::vector<uint8_t> labels(slice.count);
  for (size_t e = 0; e < s.examples.size(); ++e) {
    const auto& ex = s.examples[e];
    const double m = margin(ex, e, params, factors_, s);
    const double loss = softplus(ex.label ? -m : m);
    if (std::isnan(loss))
      ++part.non_finite;
    else
      part.loss_nats.add(loss);
    part.correct += (m > 0) == (ex.label == 1) ? 1 : 0;
    scores[e] = static_cast<float>(m);
    labels[e] = ex.label;
  }
  part.examples = slice.count;
  part.scores = *score_histogram::of(scores, labels);  // equal sizes: cannot fail
  return part;
}

quality_target ctr_model::target() const {
  quality_target t;
  const double bayes = *planted_.log_loss;
  const double best_auc = *planted_.metric("auc");
  if (same_config(data_.config(), ctr_config{})) {
    const auto& plain = factors_ == 0 ? ctr_lr_plain : ctr_fm_plain;
    t.max_log_loss = 1.005 * plain.log_loss;
    t.bounds.push_back({"auc", plain.auc - 0.002, std::nullopt});
    t.basis = "within 0.5% of the plain trainer's log loss " + std::to_string(plain.log_loss) +
              " and 0.002 of its AUC " + std::to_string(plain.auc) +
              " (AdaGrad lr 1, batch 256, one epoch; Bayes log loss " + std::to_string(bayes) +
              ", planted AUC " + std::to_string(best_auc) + ")";
    return t;
  }
  t.max_log_loss = base_entropy();
  t.bounds.push_back({"auc", 0.5 * (0.5 + best_auc), std::nullopt});
  t.basis = "below the base rate's entropy " + std::to_string(base_entropy()) +
            " and an AUC above the midpoint of 0.5 and the planted model's " +
            std::to_string(best_auc) + " (Bayes log loss " + std::to_string(bayes) + ")";
  return t;
}

}  // namespace keel
