// The application's side of a worker's loop (ps_client.hpp): checks what the
// application asks against the model's layout, then hands it to the
// worker's channel (actors/core/client_channel.hpp), which answers.
#include "actors/job/ps_client.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "actors/core/client_channel.hpp"
#include "messages/errors.hpp"
#include "messages/finite.hpp"

namespace keel {

namespace {

bool ascending_distinct(const std::vector<uint64_t>& keys) {
  return std::adjacent_find(keys.begin(), keys.end(), std::greater_equal<uint64_t>()) == keys.end();
}

// The index of the first value of `v` that is not finite, if any (a fast
// scan first: the gradient is nearly always finite).
std::optional<size_t> first_non_finite(const std::vector<float>& v) {
  if (all_finite(v.data(), v.size()))
    return std::nullopt;
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      return i;
  return std::nullopt;
}

// Dense key `k` as its tensor's element: "fc1.weight[3, 5]".
std::string dense_element(const parameter_layout& layout, uint64_t k) {
  for (auto& t : layout.dense()) {
    if (k < t.first_key || k >= t.first_key + t.size)
      continue;
    std::vector<uint64_t> at(t.shape.size());
    uint64_t i = k - t.first_key;
    for (size_t d = t.shape.size(); d-- > 0;) {
      at[d] = t.shape[d] > 0 ? i % t.shape[d] : 0;
      i = t.shape[d] > 0 ? i / t.shape[d] : 0;
    }
    std::string out = t.name + "[";
    for (size_t d = 0; d < at.size(); ++d) out += (d ? ", " : "") + std::to_string(at[d]);
    return out + "]";
  }
  return "dense key " + std::to_string(k);
}

std::string value_text(float v) {
  return std::isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf";
}

}  // namespace

ps_client::ps_client(uint32_t worker, uint64_t steps, std::shared_ptr<const model> m,
                     std::shared_ptr<client_channel> channel)
    : worker_(worker), steps_(steps), model_(std::move(m)), channel_(std::move(channel)) {}

caf::error ps_client::check(const step_keys& keys) const {
  auto& layout = model_->layout();
  auto bad = [&](std::string what) {
    return make_error(errc::invalid_argument, "worker:" + std::to_string(worker_) + ": pull: " + what);
  };
  if (!ascending_distinct(keys.sparse))
    return bad("the sparse keys must be ascending and distinct");
  if (!keys.sparse.empty() && keys.sparse.back() >= layout.sparse_key_count())
    return bad("sparse key " + std::to_string(keys.sparse.back()) + " is outside the model's " +
               std::to_string(layout.sparse_key_count()) + " sparse keys");
  if (keys.tables.size() > layout.tables().size())
    return bad(std::to_string(keys.tables.size()) + " key lists for the model's " +
               std::to_string(layout.tables().size()) + " tables");
  for (size_t t = 0; t < keys.tables.size(); ++t)
    if (!ascending_distinct(keys.tables[t]))
      return bad("the keys of table " + layout.tables()[t].name + " must be ascending and distinct");
  return {};
}

client_future<uint64_t> ps_client::next_step() {
  return channel_->next_step();
}

client_future<std::shared_ptr<const pulled_step>> ps_client::pull(uint64_t step, step_keys keys) {
  if (auto err = check(keys)) {
    client_future<std::shared_ptr<const pulled_step>> f;
    f.set(err);
    return f;
  }
  keys.tables.resize(model_->layout().tables().size());
  return channel_->pull(step, std::move(keys));
}

gradient_buffer ps_client::gradient_for(const pulled_step& p) const {
  gradient_buffer g;
  g.dense.assign(p.dense.size(), 0.0f);
  g.sparse_keys = p.sparse_keys;
  g.sparse_values.assign(p.sparse_keys.size(), 0.0f);
  for (size_t t = 0; t < p.table_keys.size(); ++t)
    g.tables.push_back({p.table_keys[t], std::vector<float>(p.table_rows[t].size(), 0.0f)});
  return g;
}

caf::error ps_client::non_finite(uint64_t step, const gradient_buffer& g) const {
  auto& layout = model_->layout();
  auto bad = [&](const std::string& where, float v) {
    return make_error(errc::invalid_argument,
                      "worker:" + std::to_string(worker_) + ": push of step " + std::to_string(step) +
                        ": the gradient of " + where + " is " + value_text(v) +
                        " (a gradient that is not finite is refused; with the check off the worker skips "
                        "the step instead)");
  };
  if (auto i = first_non_finite(g.dense))
    return bad(dense_element(layout, *i), g.dense[*i]);
  if (auto i = first_non_finite(g.sparse_values))
    return bad("sparse key " + std::to_string(i < g.sparse_keys.size() ? g.sparse_keys[*i] : *i),
               g.sparse_values[*i]);
  for (size_t t = 0; t < g.tables.size(); ++t) {
    auto i = first_non_finite(g.tables[t].rows);
    if (!i)
      continue;
    std::string name = t < layout.tables().size() ? layout.tables()[t].name : "table " + std::to_string(t);
    uint64_t dim = t < layout.tables().size() && layout.tables()[t].dim > 0 ? layout.tables()[t].dim : 1;
    auto row = *i / dim;
    auto key = row < g.tables[t].keys.size() ? " of key " + std::to_string(g.tables[t].keys[row]) : std::string();
    return bad(name + "[row " + std::to_string(row) + key + ", element " + std::to_string(*i % dim) + "]",
               g.tables[t].rows[*i]);
  }
  return {};
}

client_future<uint64_t> ps_client::push(uint64_t step, gradient_buffer grad) {
  if (check_finite_)
    if (auto err = non_finite(step, grad)) {
      client_future<uint64_t> f;
      f.set(err);
      return f;
    }
  return channel_->push(step, std::move(grad));
}

caf::expected<span<const float>> ps_client::tensor(const pulled_step& p, const std::string& name) const {
  auto spec = model_->layout().find(name);
  if (!spec)
    return spec.error();
  return span<const float>(p.dense.data() + spec->first_key, spec->size);
}

caf::expected<span<float>> ps_client::tensor(gradient_buffer& g, const std::string& name) const {
  auto spec = model_->layout().find(name);
  if (!spec)
    return spec.error();
  if (g.dense.size() != model_->layout().dense_size())
    return make_error(errc::invalid_argument, "gradient has " + std::to_string(g.dense.size()) +
                                                  " dense values, the model " +
                                                  std::to_string(model_->layout().dense_size()));
  return span<float>(g.dense.data() + spec->first_key, spec->size);
}

}  // namespace keel
