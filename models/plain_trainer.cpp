#include "models/plain_trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
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
  return std::isfinite(g.loss) && all_finite(g.dense.data(), g.dense.size()) &&
         all_finite(g.sparse_values.data(), g.sparse_values.size());
}

void apply_sgd(const gradient_buffer& g, float lr, plain_training_result& r) {
  float* w = r.dense.data();
  const float* d = g.dense.data();
  const size_t n = g.dense.size();
  for (size_t i = 0; i < n; ++i) w[i] -= lr * d[i];
  for (size_t i = 0; i < g.sparse_keys.size(); ++i)
    r.sparse[g.sparse_keys[i]] -= lr * g.sparse_values[i];
}

}  // namespace

caf::expected<plain_training_result> train_plain(const model& m, const plain_trainer_config& config,
                                                 const plain_epoch_callback& on_epoch) {
  const uint64_t steps = steps_per_epoch(m.num_train_examples(), 1, config.batch_size);
  if (steps == 0)
    return make_error(errc::invalid_argument,
                      "plain_trainer_config.batch_size " + std::to_string(config.batch_size) +
                          " must be between 1 and the " + std::to_string(m.num_train_examples()) +
                          " training examples");
  const auto& layout = m.layout();
  plain_training_result r;
  r.dense.resize(layout.dense_size());
  m.initial_dense(config.seed, 0, r.dense);
  if (layout.sparse_key_count() > 0) {
    std::vector<uint64_t> all(layout.sparse_key_count());
    for (uint64_t k = 0; k < all.size(); ++k) all[k] = k;
    r.sparse.resize(all.size());
    m.initial_sparse(config.seed, all, r.sparse);
  }
  auto scratch = m.make_scratch();
  std::vector<uint64_t> batch;
  std::vector<uint64_t> keys;
  std::vector<float> pulled;
  gradient_buffer grad;
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
      if (auto err = m.batch_indices(at, batch))
        return err;
      if (auto err = m.sparse_keys(batch, *scratch, keys))
        return err;
      pulled.resize(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) pulled[i] = r.sparse[keys[i]];
      if (auto err = m.gradient(batch, parameter_view{r.dense, keys, pulled}, *scratch, grad))
        return err;
      ++r.steps;
      ++report.steps;
      if (!finite_gradient(grad)) {
        ++r.skipped_steps;
        continue;
      }
      apply_sgd(grad, config.lr, r);
      loss_sum += grad.loss;
      ++applied;
      r.examples += grad.examples;
    }
    report.train_seconds = seconds_since(start);
    r.train_seconds += report.train_seconds;
    report.mean_train_loss = applied ? loss_sum / static_cast<double>(applied) : 0.0;
    if (config.evaluate_each_epoch) {
      auto e = m.evaluate(full_parameters{r.dense, r.sparse}, *scratch);
      if (!e)
        return std::move(e.error());
      report.test = *e;
    }
    if (on_epoch)
      on_epoch(report);
    r.epochs.push_back(std::move(report));
  }
  auto e = m.evaluate(full_parameters{r.dense, r.sparse}, *scratch);
  if (!e)
    return std::move(e.error());
  r.final_test = *e;
  r.examples_per_second =
      r.train_seconds > 0 ? static_cast<double>(r.examples) / r.train_seconds : 0;
  return r;
}

}  // namespace keel
