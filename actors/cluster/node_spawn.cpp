#include "actors/cluster/node_spawn.hpp"

#include <algorithm>
#include <cmath>

#include <caf/actor_system.hpp>
#include <caf/deep_to_string.hpp>

#include "actors/cluster/client_slots.hpp"
#include "actors/core/client_channel.hpp"
#include "actors/data_plane/data_plane.hpp"
#include "actors/ps/checkpointer.hpp"
#include "storage/store_layout.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/shard_standby.hpp"
#include "actors/ps/worker.hpp"
#include "messages/errors.hpp"
#include "models/model_registry.hpp"

namespace keel {

namespace {

// Bounds on what a peer may ask for; far above any job keel runs, low enough
// that a bad request cannot make the node allocate without limit.
constexpr uint32_t max_workers = 1u << 16;
constexpr uint32_t max_shards = 1u << 16;
constexpr uint64_t max_dense_keys = uint64_t{1} << 28;
constexpr uint64_t max_keep_last = 1000;
constexpr uint64_t max_chain_links = 100000;  // files in one shard's chain
constexpr size_t max_routes = 4096;

caf::error bad(const std::string& where, const std::string& what) {
  return make_error(errc::invalid_argument, where + ": " + what);
}

bool finite_positive(float x) {
  return std::isfinite(x) && x > 0;
}

caf::error check_range(const std::string& where, const key_range& r) {
  if (r.begin > r.end)
    return bad(where, "begin " + std::to_string(r.begin) + " > end " + std::to_string(r.end));
  return {};
}

caf::error check_optimizer(const optimizer_config& o) {
  if (o.kind == optimizer_kind::custom)
    return bad("shard.core.optimizer.kind",
               "a custom update rule runs only in the application's process, not in a node's");
  if (static_cast<unsigned>(o.kind) > static_cast<unsigned>(optimizer_kind::adam))
    return bad("shard.core.optimizer.kind", "unknown optimizer " + std::to_string(static_cast<unsigned>(o.kind)));
  if (!finite_positive(o.lr))
    return bad("shard.core.optimizer.lr", "must be finite and positive");
  for (auto [name, v] : {std::pair{"momentum", o.momentum}, {"beta1", o.beta1}, {"beta2", o.beta2}})
    if (!(v >= 0 && v < 1))
      return bad(std::string("shard.core.optimizer.") + name, "must be in [0, 1)");
  if (!finite_positive(o.epsilon))
    return bad("shard.core.optimizer.epsilon", "must be finite and positive");
  if (!(std::isfinite(o.initial_accumulator) && o.initial_accumulator >= 0))
    return bad("shard.core.optimizer.initial_accumulator", "must be finite and >= 0");
  return {};
}

// An elastic worker schedule from a peer: one span per worker, none empty.
caf::error check_schedule(const worker_schedule& s, uint32_t workers, const std::string& where) {
  if (!s.elastic())
    return {};
  if (s.slots() != workers || s.spans().size() != workers)
    return bad(where, std::to_string(s.spans().size()) + " spans for " + std::to_string(s.slots()) + " slots, the job has " +
                        std::to_string(workers) + " workers");
  // The schedule's own check of its spans (the run's length is not known here).
  if (auto checked = worker_schedule::make(s.spans(), 0); !checked)
    return bad(where, describe(checked.error()));
  return {};
}

caf::error check_shard(const parameter_shard_config& s) {
  auto& c = s.core;
  if (c.num_workers == 0 || c.num_workers > max_workers)
    return bad("shard.core.num_workers", std::to_string(c.num_workers) + " is not in [1, 65536]");
  if (auto err = check_schedule(c.workers, c.num_workers, "shard.core.workers"))
    return err;
  if (auto err = check_range("shard.core.dense", c.dense))
    return err;
  if (auto err = check_range("shard.core.sparse", c.sparse))
    return err;
  if (c.dense.size() > max_dense_keys)
    return bad("shard.core.dense", std::to_string(c.dense.size()) + " keys exceed the limit of 2^28");
  if (static_cast<unsigned>(c.rule.kind) > static_cast<unsigned>(consistency_kind::asp))
    return bad("shard.core.rule.kind", "unknown rule " + std::to_string(static_cast<unsigned>(c.rule.kind)));
  if (auto err = check_optimizer(c.optimizer))
    return err;
  for (auto& r : c.dense_rules)
    if (auto err = check_optimizer(r.rule))
      return err;
  for (auto& r : c.table_rules)
    if (auto err = check_optimizer(r))
      return err;
  if (auto err = check_rules(c))  // the spans and the tables' count
    return err;
  if (s.restore_from.empty() && s.initial_dense.size() != c.dense.size())
    return bad("shard.initial_dense", std::to_string(s.initial_dense.size()) + " values for " +
                                        std::to_string(c.dense.size()) + " dense keys");
  if (s.restore_from.size() > max_keep_last)
    return bad("shard.restore_from", std::to_string(s.restore_from.size()) + " snapshots (at most " +
                                       std::to_string(max_keep_last) + ")");
  for (size_t i = 0; i < s.restore_from.size(); ++i) {
    auto& r = s.restore_from[i];
    auto files = chain_files(r);
    if (files.size() > max_chain_links)
      return bad("shard.restore_from[" + std::to_string(i) + "]", "a chain of " + std::to_string(files.size()) +
                                                                   " files (at most " + std::to_string(max_chain_links) + ")");
    for (auto& l : files) {
      auto named = parse_store_file_name(l.file);
      if (!std::filesystem::path(r.dir).is_absolute() || !named || named->kind != store_file_kind::snapshot)
        return bad("shard.restore_from[" + std::to_string(i) + "]",
                   "'" + r.dir + "' / '" + l.file + "' is not a snapshot file in an absolute directory");
    }
  }
  if (s.snapshot_every_steps > 0 && !std::filesystem::path(s.checkpoint_dir).is_absolute())
    return bad("shard.checkpoint_dir", "'" + s.checkpoint_dir + "' is not an absolute path");
  if (s.retry_min.count() <= 0 || s.retry_max < s.retry_min)
    return bad("shard.retry_min", "the write backoff must be positive and at most retry_max");
  if (s.chain.full_every == 0 || !(s.chain.delta_fraction >= 0) || !std::isfinite(s.chain.delta_fraction))
    return bad("shard.chain", "full_every must be at least 1 and delta_fraction finite and not negative");
  return {};
}

caf::error check_worker(const worker_spawn& spawn) {
  auto& w = spawn.config;
  auto& core = w.core;
  if (w.num_workers == 0 || w.num_workers > max_workers)
    return bad("worker.num_workers", std::to_string(w.num_workers) + " is not in [1, 65536]");
  if (core.worker >= w.num_workers)
    return bad("worker.core.worker", std::to_string(core.worker) + " is not below num_workers " +
                                       std::to_string(w.num_workers));
  if (auto err = check_schedule(w.schedule, w.num_workers, "worker.schedule"))
    return err;
  if (core.parts.empty() || core.parts.size() > max_shards || core.parts.size() != core.shard_names.size())
    return bad("worker.core.parts", std::to_string(core.parts.size()) + " key ranges for " +
                                      std::to_string(core.shard_names.size()) + " shard names");
  for (size_t i = 0; i < core.parts.size(); ++i) {
    auto where = "worker.core.parts[" + std::to_string(i) + "]";
    if (auto err = check_range(where + ".dense", core.parts[i].dense))
      return err;
    if (auto err = check_range(where + ".sparse", core.parts[i].sparse))
      return err;
    if (core.shard_names[i].empty())
      return bad("worker.core.shard_names[" + std::to_string(i) + "]", "must not be empty");
  }
  if (!w.directory || !w.job)
    return bad(!w.directory ? "worker.directory" : "worker.job", "must be a live actor handle");
  if (w.batch_size == 0)
    return bad("worker.batch_size", "must be positive");
  using std::chrono::milliseconds;
  if (w.request_timeout <= milliseconds(0) || w.retry_min <= milliseconds(0) || w.retry_min > w.retry_max)
    return bad("worker.request_timeout/retry_min/retry_max",
               "need a positive timeout and 0 < retry_min <= retry_max");
  if (static_cast<unsigned>(core.rule) > static_cast<unsigned>(consistency_kind::asp))
    return bad("worker.core.rule", "unknown rule " + std::to_string(static_cast<unsigned>(core.rule)));
  return check_routes(spawn.routes, "worker.routes");
}

caf::expected<std::shared_ptr<const model>> build_model(const model_spec& spec,
                                                        const std::filesystem::path& data_dir) {
  auto names = model_names();
  if (std::find(names.begin(), names.end(), spec.name) == names.end()) {
    std::string known;
    for (auto& n : names)
      known += (known.empty() ? "" : ", ") + n;
    return make_error(errc::not_found, "model '" + spec.name + "' not found (this node builds " + known + ")");
  }
  model_options mo = spec.options;
  mo.data_dir = spec.data_dir.empty() ? data_dir : std::filesystem::path(spec.data_dir);
  return make_model(spec.name, mo);
}

caf::expected<std::shared_ptr<const model>> model_for(const model_spec& spec, const std::filesystem::path& data_dir,
                                                      model_cache* models) {
  return models ? models->get(spec, data_dir) : build_model(spec, data_dir);
}

// The row source of a shard with tables: the request's model, built here,
// whose tables must be the config's (name and dim, in order).
caf::expected<table_row_source> shard_rows(const parameter_shard_config& s, const model_spec& spec,
                                           const std::filesystem::path& data_dir, model_cache* models) {
  if (spec.name.empty())
    return bad("spawn_request.shard_model", "a shard with embedding tables needs the model that makes its rows");
  auto m = model_for(spec, data_dir, models);
  if (!m)
    return m.error();
  auto& tables = (*m)->layout().tables();
  auto& want = s.core.tables;
  for (size_t t = 0; t < std::max(tables.size(), want.size()); ++t)
    if (t >= tables.size() || t >= want.size() || tables[t].name != want[t].name || tables[t].dim != want[t].dim)
      return bad("shard.core.tables", "do not match the tables of model '" + spec.name + "' (" +
                                          std::to_string(tables.size()) + " tables; the config has " +
                                          std::to_string(want.size()) + ", differing at table " +
                                          std::to_string(t) + ")");
  return model_table_rows(*m, s.seed);
}

// The environment of the shard `req` names on this node (its table rows
// built from the request's model).
caf::expected<parameter_shard_env> shard_env(const spawn_request& req, const node_resources& node) {
  auto& s = req.shard;
  if (auto err = check_shard(s))
    return err;
  parameter_shard_env env;
  env.local_replica = node.replicas;
  env.standby = node.standby;
  env.io = node.io;
  if (!s.core.tables.empty()) {
    auto rows = shard_rows(s, req.shard_model, node.data_dir, node.models.get());
    if (!rows)
      return rows.error();
    env.table_rows = std::move(*rows);
  }
  return env;
}

caf::expected<caf::actor> start_shard(caf::actor_system& sys, const spawn_request& req, const node_resources& node) {
  auto env = shard_env(req, node);
  if (!env)
    return env.error();
  auto shard = spawn_parameter_shard(sys, req.shard, std::move(*env));
  if (shard && node.plane)
    node.plane->serve(*shard);
  return shard;
}

// The channel of an application's loop a worker attaches to: a client
// process's for an application_loop worker it runs; none for a worker of
// keel's own on a node. Anything else is refused, naming why.
caf::expected<std::shared_ptr<client_channel>> channel_for(const worker_spawn& w, const client_slots* clients) {
  auto name = to_string(actor_id::worker(w.config.core.worker));
  if (!w.application_loop) {
    if (clients)
      return bad("worker.application_loop", name + " runs its model's own loop: this is a client process, "
                                              "which runs only its application's loops");
    return std::shared_ptr<client_channel>();
  }
  auto channel = clients ? clients->channel(w.config.core.worker) : nullptr;
  if (!channel)
    return bad("worker.application_loop", name + " runs an application's loop: this process runs none for it");
  return channel;
}

caf::expected<caf::actor> start_worker(caf::actor_system& sys, const worker_spawn& w, const node_resources& node) {
  if (auto err = check_worker(w))
    return err;
  auto channel = channel_for(w, node.clients.get());
  if (!channel)
    return channel.error();
  auto m = model_for(w.model, node.data_dir, node.models.get());
  if (!m)
    return m.error();
  worker_env env;
  env.training_model = *m;
  env.channel = *channel;
  auto& plane = node.plane;
  if (plane) {
    for (auto& r : w.routes) plane->add_route(r.node, r.host, r.port, r.tls_name);
    env.plane = plane;
  }
  auto worker = spawn_worker(sys, w.config, std::move(env));
  if (worker && *channel) {
    auto index = w.config.core.worker;
    node.clients->started(index, *m, w.config.core.total_steps);
    caf::actor_cast<caf::abstract_actor*>(*worker)->attach_functor(
      [clients = node.clients, index] { clients->stopped(index); });
  }
  return worker;
}

caf::expected<caf::actor> start_checkpointer(caf::actor_system& sys, const checkpointer_config& c) {
  std::filesystem::path dir(c.dir);
  if (c.dir.empty() || !dir.is_absolute())
    return bad("checkpointer.dir", "'" + c.dir + "' is not an absolute path");
  if (c.keep_last == 0 || c.keep_last > max_keep_last)
    return bad("checkpointer.keep_last", std::to_string(c.keep_last) + " is not in [1, 1000]");
  if (c.num_shards == 0 || c.num_shards > max_shards)
    return bad("checkpointer.num_shards", std::to_string(c.num_shards) + " is not in [1, 65536]");
  if (!c.job)
    return bad("checkpointer.job", "must be a live actor handle");
  if (c.incomplete_timeout <= std::chrono::milliseconds(0))
    return bad("checkpointer.incomplete_timeout", "must be positive");
  return spawn_checkpointer(sys, c);
}

}  // namespace

caf::error check_routes(const std::vector<data_route>& routes, const std::string& where) {
  if (routes.size() > max_routes)
    return bad(where, std::to_string(routes.size()) + " routes (at most " + std::to_string(max_routes) + ")");
  for (size_t i = 0; i < routes.size(); ++i) {
    auto& r = routes[i];
    if (r.node.empty() || r.node.size() > 256 || r.host.empty() || r.host.size() > 256 || r.port == 0 ||
        r.tls_name.size() > 256)
      return bad(where + "[" + std::to_string(i) + "]",
                 "needs a node id and a host (1 to 256 characters each), a port, and a TLS name of at most 256");
  }
  return {};
}

caf::expected<caf::actor> start_requested(caf::actor_system& sys, const spawn_request& req,
                                          const node_resources& node) {
  auto index_agrees = [&](uint32_t configured) -> caf::error {
    if (req.id.index == configured)
      return {};
    return bad("spawn_request.id", "names " + to_string(req.id) + " but its config is " +
                                     to_string(actor_id{req.id.kind, configured}));
  };
  switch (req.id.kind) {
    case actor_kind::shard:
      if (auto err = index_agrees(req.shard.core.shard))
        return err;
      return start_shard(sys, req, node);
    case actor_kind::worker:
      if (auto err = index_agrees(req.worker.config.core.worker))
        return err;
      return start_worker(sys, req.worker, node);
    case actor_kind::checkpointer:
      return start_checkpointer(sys, req.checkpointer);
    default:
      return bad("spawn_request.id", "a node starts no '" + to_string(req.id.kind) +
                                       "' (it starts shard, worker or checkpointer)");
  }
}

caf::expected<uint64_t> prepare_requested(const spawn_request& req, const node_resources& node) {
  if (req.id.kind != actor_kind::shard || req.id.index != req.shard.core.shard)
    return bad("spawn_request.id", "a pre-copy is of a shard, and names it as its config does");
  if (!node.standby)
    return make_error(errc::invalid_argument, "this node keeps no pre-copies");
  auto env = shard_env(req, node);
  if (!env)
    return env.error();
  return node.standby->prepare(req.shard, *env);
}

caf::expected<std::shared_ptr<const model>> model_cache::get(const model_spec& spec,
                                                             const std::filesystem::path& data_dir) {
  auto key = caf::deep_to_string(spec) + "|" + data_dir.string();
  std::lock_guard<std::mutex> guard(mtx_);
  for (auto it = models_.begin(); it != models_.end(); ++it)
    if (it->first == key) {
      models_.splice(models_.begin(), models_, it);
      return models_.front().second;
    }
  auto m = build_model(spec, data_dir);
  if (!m)
    return m.error();
  ++builds_;
  models_.emplace_front(std::move(key), *m);
  while (models_.size() > capacity_) models_.pop_back();
  return *m;
}

size_t model_cache::builds() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return builds_;
}

}  // namespace keel
