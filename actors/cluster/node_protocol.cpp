#include "actors/cluster/node_protocol.hpp"

#include "actors/core/job_event.hpp"
#include "actors/core/slice_wire.hpp"
#include "actors/ps/worker.hpp"

#include <caf/actor_system_config.hpp>

#include "messages/register_types.hpp"
#include "supervision/directory.hpp"

namespace keel {

void register_node_types(caf::actor_system_config& cfg) {
  register_message_types(cfg);
  cfg.add_message_type<spawn_request>("keel.spawn_request");
  cfg.add_message_type<node_info>("keel.node_info");
  cfg.add_message_type<std::vector<node_info>>("std::vector<keel.node_info>");
  cfg.add_message_type<node_status>("keel.node_status");
  cfg.add_message_type<std::vector<data_route>>("std::vector<keel.data_route>");
  cfg.add_message_type<supervision::directory_update>("keel.directory_update");
  // What a job's remote shards and workers send its coordinator.
  cfg.add_message_type<job_event>("keel.job_event");
  cfg.add_message_type<step_report>("keel.step_report");
  cfg.add_message_type<worker_report>("keel.worker_report");
  cfg.add_message_type<slice_task>("keel.slice_task");
  cfg.add_message_type<slice_score>("keel.slice_score");
  // A change of workers at runtime (job_workers.cpp).
  cfg.add_message_type<worker_schedule>("keel.worker_schedule");
  // What a shard sends its peer's replica.
  cfg.add_message_type<chain_link>("keel.chain_link");
  cfg.add_message_type<std::vector<chain_link>>("std::vector<keel.chain_link>");
}

spawn_request make_spawn_request(parameter_shard_config s, uint64_t incarnation, model_spec model) {
  spawn_request r;
  r.id = actor_id::shard(s.core.shard);
  r.incarnation = incarnation;
  r.shard = std::move(s);
  r.shard_model = std::move(model);
  return r;
}

spawn_request make_spawn_request(worker_spawn w, uint64_t incarnation) {
  spawn_request r;
  r.id = actor_id::worker(w.config.core.worker);
  r.incarnation = incarnation;
  r.worker = std::move(w);
  return r;
}

spawn_request make_spawn_request(checkpointer_config c, uint64_t incarnation) {
  spawn_request r;
  r.id = actor_id::checkpointer();
  r.incarnation = incarnation;
  r.checkpointer = std::move(c);
  return r;
}

namespace {
constexpr const char* client_worker_prefix = "client:worker:";
}

std::string client_worker_type(uint32_t worker) {
  return client_worker_prefix + std::to_string(worker);
}

std::optional<uint32_t> parse_client_worker_type(const std::string& text) {
  const std::string prefix = client_worker_prefix;
  if (text.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  auto digits = text.substr(prefix.size());
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  auto w = std::stoul(digits);
  if (w >= 65536)
    return std::nullopt;
  return static_cast<uint32_t>(w);
}

}  // namespace keel
