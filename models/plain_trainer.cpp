#include "models/plain_trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "messages/errors.hpp"

namespace keel {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

// A float is NaN or infinite exactly when its exponent bits are all ones.
// Testing the bits (not isfinite per value) lets the compiler vectorise the
// scan, which otherwise costs as much as a small model's step.
bool all_finite(const float* v, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

bool finite_gradient(const gradient_buffer& g) {
  bool finite = std::isfinite(g.loss) && all_finite(g.dense.data(), g.dense.size()) &&
                all_finite(g.sparse_values.data(), g.sparse_values.size());
  for (const auto& t : g.tables) finite = finite && all_finite(t.rows.data(), t.rows.size());
  return finite;
}

// The rows of a model's tables for one batch or slice: what a worker pulls.
struct table_pull {
  table_key_lists keys;
  std::vector<std::vector<float>> rows;         // per table, keys.size() * dim
  std::vector<std::vector<uint64_t>> row_numbers;  // per table, each key's row in the plain_table
  std::vector<table_rows> views;
  std::vector<uint64_t> missing;  // keys of one table with no row yet
  std::vector<float> fresh;       // their initial rows
};

// Fills p.rows (and p.views) with the rows of p.keys. A missing row is
// created in the table when `create` (a training step), else only read as
// its initial value (an evaluation).
caf::error pull_rows(const model& m, uint64_t seed, std::vector<plain_table>& tables, bool create,
                     table_pull& p) {
  const size_t n_tables = tables.size();
  p.rows.resize(n_tables);
  p.row_numbers.resize(n_tables);
  p.views.resize(n_tables);
  for (uint32_t t = 0; t < n_tables; ++t) {
    auto& table = tables[t];
    const auto& keys = p.keys[t];
    const uint32_t d = table.dim;
    p.missing.clear();
    for (uint64_t key : keys)
      if (table.index.find(key) == table.index.end())
        p.missing.push_back(key);
    p.fresh.resize(p.missing.size() * d);
    if (auto err = m.initial_rows(seed, t, p.missing, p.fresh))
      return err;
    if (create)
      for (size_t i = 0; i < p.missing.size(); ++i) {
        table.index.emplace(p.missing[i], table.rows.size() / d);
        table.rows.insert(table.rows.end(), p.fresh.begin() + i * d, p.fresh.begin() + (i + 1) * d);
      }
    auto& rows = p.rows[t];
    rows.resize(keys.size() * d);
    p.row_numbers[t].resize(keys.size());
    size_t next_fresh = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = table.index.find(keys[i]);
      const float* src = nullptr;
      if (it != table.index.end()) {
        p.row_numbers[t][i] = it->second;
        src = table.rows.data() + it->second * d;
      } else {
        src = p.fresh.data() + (next_fresh++) * d;  // missing keys are in key order
      }
      std::copy(src, src + d, rows.data() + i * d);
    }
    p.views[t] = table_rows{keys, rows};
  }
  return {};
}

// The update of `n` parameters `w` by gradient `g`: w -= lr * g, or
// AdaGrad's step with the accumulators `acc` (the rule of keel's shards,
// actors/core/optimizer.cpp).
void update(const plain_trainer_config& c, float* w, float* acc, const float* g, size_t n) {
  const float lr = c.lr;
  if (c.optimizer == plain_optimizer::sgd) {
    for (size_t i = 0; i < n; ++i) w[i] -= lr * g[i];
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    acc[i] += g[i] * g[i];
    w[i] -= lr * g[i] / (std::sqrt(acc[i]) + c.epsilon);
  }
}

// The update of the rows a step pulled (all of them exist: pull_rows created them).
void apply_rows(const gradient_buffer& g, const plain_trainer_config& c, const table_pull& p,
                std::vector<plain_table>& tables) {
  for (size_t t = 0; t < tables.size(); ++t) {
    auto& table = tables[t];
    const uint32_t d = table.dim;
    if (c.optimizer == plain_optimizer::adagrad)
      table.accumulators.resize(table.rows.size(), c.initial_accumulator);
    const float* grad = g.tables[t].rows.data();
    for (size_t i = 0; i < p.row_numbers[t].size(); ++i) {
      const uint64_t at = p.row_numbers[t][i] * d;
      float* state = table.accumulators.empty() ? nullptr : table.accumulators.data() + at;
      update(c, table.rows.data() + at, state, grad + i * d, d);
    }
  }
}

// The model's score of the final parameters: by slices when it evaluates
// slices, else on full_parameters.
caf::expected<evaluation> evaluate(const model& m, const plain_trainer_config& config,
                                   plain_training_result& r, model_scratch& scratch) {
  if (!m.evaluates_slices())
    return m.evaluate(full_parameters{r.dense, r.sparse}, scratch);
  partial_evaluation whole;
  table_pull p;
  std::vector<uint64_t> sparse_keys;
  std::vector<float> sparse_values;
  const uint64_t n = m.num_test_examples();
  const uint64_t step = std::max<uint64_t>(config.eval_slice_examples, 1);
  for (uint64_t first = 0; first < n; first += step) {
    const test_slice slice{first, std::min(step, n - first)};
    if (auto err = m.test_keys(slice, scratch, sparse_keys, p.keys))
      return err;
    if (auto err = pull_rows(m, config.seed, r.tables, false, p))
      return err;
    sparse_values.resize(sparse_keys.size());
    for (size_t i = 0; i < sparse_keys.size(); ++i) sparse_values[i] = r.sparse[sparse_keys[i]];
    auto part =
        m.evaluate_slice(slice, parameter_view{r.dense, sparse_keys, sparse_values, p.views}, scratch);
    if (!part)
      return std::move(part.error());
    whole.merge(*part);
  }
  return whole.result();
}

// AdaGrad's accumulators of the dense and sparse parameters (empty under SGD).
struct plain_accumulators {
  std::vector<float> dense;
  std::vector<float> sparse;
};

void apply_dense(const gradient_buffer& g, const plain_trainer_config& c, plain_training_result& r,
                 plain_accumulators& acc) {
  update(c, r.dense.data(), acc.dense.data(), g.dense.data(), g.dense.size());
  for (size_t i = 0; i < g.sparse_keys.size(); ++i) {
    const uint64_t k = g.sparse_keys[i];
    update(c, &r.sparse[k], acc.sparse.empty() ? nullptr : acc.sparse.data() + k,
           &g.sparse_values[i], 1);
  }
}

}  // namespace

const float* plain_table::find(uint64_t key) const {
  auto it = index.find(key);
  return it == index.end() ? nullptr : rows.data() + it->second * dim;
}

namespace {

// One run's working state: the step's buffers, reused from step to step.
struct plain_run {
  const model& m;
  const plain_trainer_config& config;
  plain_training_result r;
  plain_accumulators acc;
  table_pull rows;
  std::unique_ptr<model_scratch> scratch;
  std::vector<uint64_t> batch;
  std::vector<uint64_t> keys;
  std::vector<float> pulled;
  gradient_buffer grad;

  // The initial parameters and optimizer state.
  plain_run(const model& model_, const plain_trainer_config& c)
      : m(model_), config(c), scratch(model_.make_scratch()) {
    const auto& layout = m.layout();
    r.dense.resize(layout.dense_size());
    m.initial_dense(config.seed, 0, r.dense);
    if (layout.sparse_key_count() > 0) {
      std::vector<uint64_t> all(layout.sparse_key_count());
      for (uint64_t k = 0; k < all.size(); ++k) all[k] = k;
      r.sparse.resize(all.size());
      m.initial_sparse(config.seed, all, r.sparse);
    }
    r.tables.resize(layout.tables().size());
    for (size_t t = 0; t < r.tables.size(); ++t) r.tables[t].dim = layout.tables()[t].dim;
    if (config.optimizer == plain_optimizer::adagrad) {
      acc.dense.assign(r.dense.size(), config.initial_accumulator);
      acc.sparse.assign(r.sparse.size(), config.initial_accumulator);
    }
  }

  // The step at `at`: pull, gradient, update (unless the gradient is not
  // finite). Sets *applied_loss to the batch's loss when it was applied.
  caf::error step(const batch_position& at, std::optional<double>* applied_loss) {
    *applied_loss = std::nullopt;
    const bool has_tables = !r.tables.empty();
    if (auto err = m.batch_indices(at, batch))
      return err;
    if (auto err = m.sparse_keys(batch, *scratch, keys))
      return err;
    pulled.resize(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) pulled[i] = r.sparse[keys[i]];
    if (has_tables) {
      if (auto err = m.table_keys(batch, *scratch, rows.keys))
        return err;
      if (auto err = pull_rows(m, config.seed, r.tables, true, rows))
        return err;
    }
    if (auto err =
            m.gradient(batch, parameter_view{r.dense, keys, pulled, rows.views}, *scratch, grad))
      return err;
    ++r.steps;
    if (!finite_gradient(grad)) {
      ++r.skipped_steps;
      return {};
    }
    apply_dense(grad, config, r, acc);
    if (has_tables)
      apply_rows(grad, config, rows, r.tables);
    r.examples += grad.examples;
    *applied_loss = grad.loss;
    return {};
  }
};

}  // namespace

caf::expected<plain_training_result> train_plain(const model& m, const plain_trainer_config& config,
                                                 const plain_epoch_callback& on_epoch) {
  const uint64_t steps = steps_per_epoch(m.num_train_examples(), 1, config.batch_size);
  if (steps == 0)
    return make_error(errc::invalid_argument,
                      "plain_trainer_config.batch_size " + std::to_string(config.batch_size) +
                          " must be between 1 and the " + std::to_string(m.num_train_examples()) +
                          " training examples");
  plain_run run(m, config);
  auto& r = run.r;
  batch_position at;
  at.seed = config.seed;
  at.batch_size = config.batch_size;
  for (uint64_t epoch = 0; epoch < config.epochs; ++epoch) {
    if (config.max_steps > 0 && r.steps >= config.max_steps)
      break;
    plain_epoch report;
    report.epoch = epoch;
    const auto start = clock_type::now();
    double loss_sum = 0;
    uint64_t applied = 0;
    for (uint64_t step = 0; step < steps; ++step) {
      if (config.max_steps > 0 && r.steps >= config.max_steps)
        break;
      at.epoch = epoch;
      at.step = step;
      std::optional<double> loss;
      if (auto err = run.step(at, &loss))
        return err;
      ++report.steps;
      if (loss) {
        loss_sum += *loss;
        ++applied;
      }
    }
    report.train_seconds = seconds_since(start);
    r.train_seconds += report.train_seconds;
    report.mean_train_loss = applied ? loss_sum / static_cast<double>(applied) : 0.0;
    if (config.evaluate_each_epoch) {
      auto e = evaluate(m, config, r, *run.scratch);
      if (!e)
        return std::move(e.error());
      report.test = *e;
    }
    if (on_epoch)
      on_epoch(report);
    r.epochs.push_back(std::move(report));
  }
  auto e = evaluate(m, config, r, *run.scratch);
  if (!e)
    return std::move(e.error());
  r.final_test = *e;
  r.examples_per_second =
      r.train_seconds > 0 ? static_cast<double>(r.examples) / r.train_seconds : 0;
  return std::move(r);
}

}  // namespace keel
