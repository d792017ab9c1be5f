// The application's side of a worker's loop (ps_client.hpp): checks what the
// application asks against the model's layout, then hands it to the
// worker's channel (actors/core/client_channel.hpp), which answers.
#include "actors/job/ps_client.hpp"

#include <algorithm>

#include "actors/core/client_channel.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

bool ascending_distinct(const std::vector<uint64_t>& keys) {
  return std::adjacent_find(keys.begin(), keys.end(), std::greater_equal<uint64_t>()) == keys.end();
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

client_future<uint64_t> ps_client::push(uint64_t step, gradient_buffer grad) {
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
