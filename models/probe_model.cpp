#include "models/probe_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "messages/errors.hpp"
#include "models/counter_rng.hpp"

namespace keel {

namespace {

struct probe_scratch : model_scratch {};

// Domain tags for the table's hashes.
constexpr uint64_t pool_tag = 0x70726f62652e706bULL;  // "probe.pk"
constexpr uint64_t init_tag = 0x70726f62652e696eULL;  // "probe.in"

double objective(span<const float> dense, span<const float> sparse, float lr) {
  double sum = 0;
  for (float v : dense) sum += v;
  for (float v : sparse) sum += v;
  return -sum / lr;
}

}  // namespace

probe_model::probe_model(const probe_config& c) : config_(c) {
  layout_.add_dense("probe.dense", {c.dense_keys});
  if (c.sparse_keys > 0)
    layout_.set_sparse("probe.sparse", c.sparse_keys);
  if (c.table_keys > 0)
    layout_.add_table(table_name, table_dim);
}

caf::expected<std::shared_ptr<const probe_model>> probe_model::make(const probe_config& c) {
  int exponent = 0;
  if (c.dense_keys == 0)
    return make_error(errc::invalid_argument, "probe_config.dense_keys must be at least 1");
  if (c.examples == 0)
    return make_error(errc::invalid_argument, "probe_config.examples must be at least 1");
  if (c.table_keys > 0 && c.table_pool == 0)
    return make_error(errc::invalid_argument,
                      "probe_config.table_pool must be at least 1 when table_keys is set");
  // frexp gives mantissa 0.5 exactly for powers of two.
  if (!(c.lr > 0) || !std::isfinite(c.lr) || std::frexp(c.lr, &exponent) != 0.5f)
    return make_error(errc::invalid_argument,
                      "probe_config.lr " + std::to_string(c.lr) +
                          " is not a positive power of two, so a push would not add exactly 1");
  return std::shared_ptr<const probe_model>(std::make_shared<probe_model>(c));
}

quality_target probe_model::target() const {
  return {std::nullopt, std::nullopt,
          "none: the probe checks exactly-once delivery (probe_model::check)", {}};
}

void probe_model::initial_dense(uint64_t, uint64_t, span<float> out) const {
  std::fill(out.begin(), out.end(), 0.0f);
}

std::unique_ptr<model_scratch> probe_model::make_scratch() const {
  return std::make_unique<probe_scratch>();
}

caf::error probe_model::do_sparse_keys(span<const uint64_t>, model_scratch&,
                                       std::vector<uint64_t>& keys) const {
  keys.resize(config_.sparse_keys);
  for (uint64_t k = 0; k < config_.sparse_keys; ++k) keys[k] = k;
  return {};
}

caf::error probe_model::do_gradient(span<const uint64_t> batch, const parameter_view& params,
                                    model_scratch& scratch, gradient_buffer& out) const {
  if (auto s = own_scratch<probe_scratch>(scratch); !s)
    return std::move(s.error());
  const float g = -1.0f / config_.lr;
  out.dense.assign(config_.dense_keys, g);
  out.sparse_keys.assign(params.sparse_keys.begin(), params.sparse_keys.end());
  out.sparse_values.assign(params.sparse_keys.size(), g);
  out.tables.resize(params.tables.size());
  for (size_t t = 0; t < params.tables.size(); ++t) {
    out.tables[t].keys.assign(params.tables[t].keys.begin(), params.tables[t].keys.end());
    out.tables[t].rows.assign(params.tables[t].keys.size() * table_dim, g);
  }
  out.loss = objective(params.dense, params.sparse_values, config_.lr);
  out.examples = static_cast<uint32_t>(batch.size());
  return {};
}

void probe_model::do_initial_rows(uint64_t seed, uint32_t, span<const uint64_t> keys,
                                  span<float> out) const {
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t h = counter_hash(seed, init_tag, keys[i]);
    for (uint32_t j = 0; j < table_dim; ++j)
      out[i * table_dim + j] = static_cast<float>((h >> (4 * j)) & 15);
  }
}

caf::error probe_model::do_table_keys(span<const uint64_t> batch, model_scratch& scratch,
                                      table_key_lists& keys) const {
  if (auto s = own_scratch<probe_scratch>(scratch); !s)
    return std::move(s.error());
  keys.resize(layout_.tables().size());
  if (keys.empty())
    return {};
  auto& k = keys[0];
  k.clear();
  // Key i: pool entry hash(example i mod batch, i) mod pool, that entry's
  // 64-bit key a hash of its index.
  for (uint64_t i = 0; i < config_.table_keys && !batch.empty(); ++i) {
    const uint64_t entry = counter_hash(pool_tag, batch[i % batch.size()], i) % config_.table_pool;
    k.push_back(mix64(pool_tag ^ mix64(entry)));
  }
  std::sort(k.begin(), k.end());
  k.erase(std::unique(k.begin(), k.end()), k.end());
  return {};
}

caf::expected<std::map<uint64_t, uint64_t>> probe_model::table_touches(uint64_t seed,
                                                                      uint32_t workers,
                                                                      uint32_t batch_size,
                                                                      uint64_t steps) const {
  std::map<uint64_t, uint64_t> touches;
  if (!has_table())
    return touches;
  const uint64_t spe = steps_per_epoch(config_.examples, workers, batch_size);
  if (spe == 0)
    return make_error(errc::invalid_argument,
                      "probe: " + std::to_string(workers) + " workers with batches of " +
                          std::to_string(batch_size) + " have no step in an epoch of " +
                          std::to_string(config_.examples) + " examples");
  auto scratch = make_scratch();
  std::vector<uint64_t> batch;
  table_key_lists keys;
  for (uint32_t w = 0; w < workers; ++w)
    for (uint64_t step = 0; step < steps; ++step) {
      const auto es = split_global_step(step, spe);
      if (auto err = batch_indices({seed, es.epoch, es.step, w, workers, batch_size}, batch))
        return err;
      if (auto err = table_keys(batch, *scratch, keys))
        return err;
      for (uint64_t key : keys[0]) ++touches[key];
    }
  return touches;
}

caf::expected<evaluation> probe_model::do_evaluate(const full_parameters& params,
                                                   model_scratch& scratch) const {
  if (auto s = own_scratch<probe_scratch>(scratch); !s)
    return std::move(s.error());
  evaluation e;
  e.metrics.push_back({"objective", objective(params.dense, params.sparse, config_.lr)});
  return e;
}

caf::error probe_model::check(const full_parameters& params, uint64_t acknowledged_pushes) const {
  return check(params, [acknowledged_pushes](uint64_t) { return acknowledged_pushes; });
}

caf::error probe_model::check(const full_parameters& params,
                              const std::function<uint64_t(uint64_t)>& acknowledged) const {
  auto differs = [&](const char* space, size_t key, float got, uint64_t want) {
    return make_error(errc::invalid_argument,
                      std::string("probe: ") + space + " key " + std::to_string(key) + " is " +
                          std::to_string(got) + ", expected " + std::to_string(want) +
                          " (the acknowledged pushes)");
  };
  if (params.dense.size() != layout_.dense_size() ||
      params.sparse.size() != layout_.sparse_key_count())
    return make_error(errc::invalid_argument, "probe: full_parameters do not match the layout");
  for (size_t k = 0; k < params.dense.size(); ++k)
    if (uint64_t want = acknowledged(k); params.dense[k] != static_cast<float>(want))
      return differs("dense", k, params.dense[k], want);
  for (size_t k = 0; k < params.sparse.size(); ++k)
    if (uint64_t want = acknowledged(params.dense.size() + k); params.sparse[k] != static_cast<float>(want))
      return differs("sparse", k, params.sparse[k], want);
  return {};
}

}  // namespace keel
