#include "actors/cluster/node_spawn.hpp"

#include <algorithm>
#include <cmath>

#include <caf/actor_system.hpp>

#include "actors/data_plane/data_plane.hpp"
#include "actors/ps/checkpointer.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/worker.hpp"
#include "messages/decode.hpp"
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
  if (static_cast<unsigned>(o.kind) > static_cast<unsigned>(optimizer_kind::adam))
    return bad("shard.config.optimizer.kind", "unknown optimizer " + std::to_string(static_cast<unsigned>(o.kind)));
  if (!finite_positive(o.lr))
    return bad("shard.config.optimizer.lr", "must be finite and positive");
  for (auto [name, v] : {std::pair{"momentum", o.momentum}, {"beta1", o.beta1}, {"beta2", o.beta2}})
    if (!(v >= 0 && v < 1))
      return bad(std::string("shard.config.optimizer.") + name, "must be in [0, 1)");
  if (!finite_positive(o.epsilon))
    return bad("shard.config.optimizer.epsilon", "must be finite and positive");
  if (!(std::isfinite(o.initial_accumulator) && o.initial_accumulator >= 0))
    return bad("shard.config.optimizer.initial_accumulator", "must be finite and >= 0");
  return {};
}

caf::error check_shard(const shard_spawn& s) {
  auto& c = s.config;
  if (c.num_workers == 0 || c.num_workers > max_workers)
    return bad("shard.config.num_workers", std::to_string(c.num_workers) + " is not in [1, 65536]");
  if (auto err = check_range("shard.config.dense", c.dense))
    return err;
  if (auto err = check_range("shard.config.sparse", c.sparse))
    return err;
  if (c.dense.size() > max_dense_keys)
    return bad("shard.config.dense", std::to_string(c.dense.size()) + " keys exceed the limit of 2^28");
  if (static_cast<unsigned>(c.rule.kind) > static_cast<unsigned>(consistency_kind::asp))
    return bad("shard.config.rule.kind", "unknown rule " + std::to_string(static_cast<unsigned>(c.rule.kind)));
  if (auto err = check_optimizer(c.optimizer))
    return err;
  if (s.snapshot.empty() && s.initial_dense.size() != c.dense.size())
    return bad("shard.initial_dense", std::to_string(s.initial_dense.size()) + " values for " +
                                        std::to_string(c.dense.size()) + " dense keys");
  return {};
}

caf::expected<caf::actor> start_shard(caf::actor_system& sys, const shard_spawn& s,
                                      const std::shared_ptr<data_plane>& plane) {
  if (auto err = check_shard(s))
    return err;
  shard_options o;
  o.config = s.config;
  o.initial_dense = s.initial_dense;
  o.snapshot = s.snapshot.frame();
  o.snapshot_every_steps = s.snapshot_every_steps;
  o.directory = s.directory;
  auto shard = spawn_parameter_shard(sys, std::move(o));
  if (shard && plane)
    plane->serve(*shard);
  return shard;
}

caf::error check_worker(const worker_spawn& w) {
  if (w.num_workers == 0 || w.num_workers > max_workers)
    return bad("worker.num_workers", std::to_string(w.num_workers) + " is not in [1, 65536]");
  if (w.worker >= w.num_workers)
    return bad("worker.worker", std::to_string(w.worker) + " is not below num_workers " +
                                  std::to_string(w.num_workers));
  if (w.parts.empty() || w.parts.size() > max_shards || w.parts.size() != w.shard_names.size())
    return bad("worker.parts", std::to_string(w.parts.size()) + " key ranges for " +
                                 std::to_string(w.shard_names.size()) + " shard names");
  for (size_t i = 0; i < w.parts.size(); ++i) {
    auto where = "worker.parts[" + std::to_string(i) + "]";
    if (auto err = check_range(where + ".dense", w.parts[i].dense))
      return err;
    if (auto err = check_range(where + ".sparse", w.parts[i].sparse))
      return err;
    if (w.shard_names[i].empty())
      return bad("worker.shard_names[" + std::to_string(i) + "]", "must not be empty");
  }
  if (!w.directory || !w.job)
    return bad(!w.directory ? "worker.directory" : "worker.job", "must be a live actor handle");
  if (w.batch_size == 0)
    return bad("worker.batch_size", "must be positive");
  if (w.request_timeout_ms == 0 || w.retry_min_ms == 0 || w.retry_min_ms > w.retry_max_ms)
    return bad("worker.request_timeout_ms/retry_min_ms/retry_max_ms",
               "need a positive timeout and 0 < retry_min_ms <= retry_max_ms");
  if (static_cast<unsigned>(w.rule) > static_cast<unsigned>(consistency_kind::asp))
    return bad("worker.rule", "unknown rule " + std::to_string(static_cast<unsigned>(w.rule)));
  return check_routes(w.routes, "worker.routes");
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

caf::expected<caf::actor> start_worker(caf::actor_system& sys, const worker_spawn& w,
                                       const std::filesystem::path& data_dir,
                                       const std::shared_ptr<data_plane>& plane) {
  if (auto err = check_worker(w))
    return err;
  auto m = build_model(w.model, data_dir);
  if (!m)
    return m.error();
  worker_options o;
  o.worker = w.worker;
  o.num_workers = w.num_workers;
  o.training_model = *m;
  o.parts = w.parts;
  o.shard_names = w.shard_names;
  o.directory = w.directory;
  o.job = w.job;
  o.seed = w.seed;
  o.batch_size = w.batch_size;
  o.total_steps = w.total_steps;
  o.request_timeout = std::chrono::milliseconds(w.request_timeout_ms);
  o.retry_min = std::chrono::milliseconds(w.retry_min_ms);
  o.retry_max = std::chrono::milliseconds(w.retry_max_ms);
  o.epoch = w.epoch;
  o.rule = w.rule;
  o.windowed = w.windowed;
  if (plane) {
    for (auto& r : w.routes) plane->add_route(r.node, r.host, r.port, r.tls_name);
    o.plane = plane;
  }
  return spawn_worker(sys, std::move(o));
}

caf::expected<caf::actor> start_checkpointer(caf::actor_system& sys, const checkpointer_spawn& c) {
  std::filesystem::path dir(c.dir);
  if (c.dir.empty() || !dir.is_absolute())
    return bad("checkpointer.dir", "'" + c.dir + "' is not an absolute path");
  if (c.keep_last == 0 || c.keep_last > max_keep_last)
    return bad("checkpointer.keep_last", std::to_string(c.keep_last) + " is not in [1, 1000]");
  if (c.num_shards == 0 || c.num_shards > max_shards)
    return bad("checkpointer.num_shards", std::to_string(c.num_shards) + " is not in [1, 65536]");
  if (!c.job)
    return bad("checkpointer.job", "must be a live actor handle");
  if (c.incomplete_timeout_ms == 0)
    return bad("checkpointer.incomplete_timeout_ms", "must be positive");
  checkpointer_options o;
  o.dir = dir;
  o.keep_last = c.keep_last;
  o.num_shards = c.num_shards;
  o.job = c.job;
  o.incomplete_timeout = std::chrono::milliseconds(c.incomplete_timeout_ms);
  return spawn_checkpointer(sys, std::move(o));
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

caf::error check_request_frames(const spawn_request& req) {
  if (req.kind == "shard" && !req.shard.snapshot.empty()) {
    auto snap = decode(req.shard.snapshot);
    if (!snap)
      return snap.error();
  }
  return {};
}

caf::expected<caf::actor> start_requested(caf::actor_system& sys, const spawn_request& req,
                                          const std::filesystem::path& data_dir,
                                          const std::shared_ptr<data_plane>& plane) {
  if (req.kind == "shard")
    return start_shard(sys, req.shard, plane);
  if (req.kind == "worker")
    return start_worker(sys, req.worker, data_dir, plane);
  if (req.kind == "checkpointer")
    return start_checkpointer(sys, req.checkpointer);
  return bad("spawn_request.kind", "unknown kind '" + req.kind + "' (a node starts shard, worker or checkpointer)");
}

}  // namespace keel
