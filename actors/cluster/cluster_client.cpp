#include "actors/cluster/cluster_client.hpp"

#include <iostream>
#include <set>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/client_slots.hpp"
#include "actors/cluster/cluster_gate.hpp"
#include "actors/cluster/node_client.hpp"
#include "actors/cluster/node_agent.hpp"
#include "actors/data_plane/data_plane.hpp"
#include "messages/errors.hpp"
#include "models/model_registry.hpp"

namespace keel {

struct cluster_client::impl {
  ~impl();
  std::unique_ptr<caf::actor_system_config> sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<client_slots> slots;
  std::shared_ptr<data_plane> plane;
  std::unique_ptr<cluster_gate> gate;
  caf::actor agent;
  std::string log_prefix;
};

cluster_client::impl::~impl() {
  if (slots)
    slots->close(make_error(errc::shutting_down, "the cluster client is closing"));
  if (gate)
    gate->stop();
  if (agent) {
    // As keel node stops its agent: with a sourced exit from this process,
    // then waiting for its down while the middleman is up.
    caf::scoped_actor self{*sys};
    self->monitor(agent);
    self->send_exit(agent, caf::exit_reason::user_shutdown);
    self->receive([](caf::down_msg&) {}, caf::after(std::chrono::seconds(10)) >> [] {});
    agent = nullptr;
  }
  if (plane)
    plane->stop();
  // `sys` goes next (members in reverse order), waiting for its actors.
}

cluster_client::cluster_client(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
cluster_client::~cluster_client() = default;

namespace {

caf::error check(const cluster_client_config& cfg) {
  auto bad = [](const std::string& why) { return make_error(errc::invalid_argument, "cluster_client: " + why); };
  if (cfg.workers.empty())
    return bad("no workers (cluster_client_config::workers names the workers whose loops this process runs)");
  std::set<uint32_t> seen;
  for (auto w : cfg.workers)
    if (!seen.insert(w).second)
      return bad("worker " + std::to_string(w) + " is named twice");
  if (cfg.secret.empty())
    return bad("no cluster secret");
  if (cfg.heartbeat_interval.count() <= 0 || cfg.connection_timeout <= cfg.heartbeat_interval)
    return bad("the heartbeat interval must be positive and below the connection timeout");
  if (cfg.join.host.empty() || cfg.join.port == 0)
    return bad("no node to join (cluster_client_config::join: HOST and a PORT other than 0)");
  return {};
}

}  // namespace

caf::expected<std::unique_ptr<cluster_client>> cluster_client::connect(cluster_client_config cfg) {
  if (auto err = check(cfg))
    return err;
  if (!cfg.log)
    cfg.log = [](const std::string& line) { std::cerr << "keel client: " + line + "\n" << std::flush; };
  auto p = std::make_unique<impl>();
  p->sys_cfg = std::make_unique<caf::actor_system_config>();
  cluster_settings settings;
  settings.heartbeat_interval = cfg.heartbeat_interval;
  settings.connection_timeout = cfg.connection_timeout;
  configure_cluster_system(*p->sys_cfg, settings);
  p->sys = std::make_unique<caf::actor_system>(*p->sys_cfg);
  exempt_caf_network_layer_from_leak_checks(*p->sys);
  p->slots = std::make_shared<client_slots>(cfg.workers);
  if (cfg.data_plane) {
    data_plane_config dc;
    dc.host = cfg.host;
    dc.secret = cfg.secret;
    dc.tls = cfg.tls;
    dc.log = [log = cfg.log](const std::string& line) { log("data plane: " + line); };
    auto plane = data_plane::start(*p->sys, dc);
    if (!plane)
      return plane.error();
    p->plane = *plane;
  }
  node_agent_config ac;
  ac.host = cfg.host;
  ac.secret = cfg.secret;
  ac.heartbeat_interval = cfg.heartbeat_interval;
  ac.peer_timeout = cfg.connection_timeout;
  ac.data_dir = cfg.data_dir.empty() ? default_data_dir() : cfg.data_dir;
  ac.plane = p->plane;
  ac.clients = p->slots;
  ac.log = cfg.log;
  auto agent = spawn_node_agent(*p->sys, ac);
  if (!agent)
    return agent.error();
  p->agent = *agent;
  cluster_gate_config gc;
  gc.host = cfg.host;
  gc.port = cfg.port;
  gc.secret = cfg.secret;
  gc.tls = cfg.tls;
  gc.log = cfg.log;
  auto gate = cluster_gate::open(*p->sys, gc, p->agent);
  if (!gate)
    return make_error(errc::io_error, "cluster_client: cannot listen on " + cfg.host + ":" + std::to_string(cfg.port) +
                                        ": " + describe(gate.error()));
  p->gate = std::move(*gate);
  caf::scoped_actor self{*p->sys};
  self->send(p->agent, node_listening_atom::value, p->gate->port());
  join_identity me{p->agent, cfg.host, p->gate->port()};
  auto peer = connect_node(*p->sys, cfg.join.host, cfg.join.port, cfg.secret, cfg.connect_timeout, me,
                           tls_peer{cfg.tls, cfg.join.identity()});
  if (!peer) {
    auto code = is(peer.error(), errc::not_authenticated) ? errc::not_authenticated
                : is(peer.error(), errc::timeout)         ? errc::timeout
                                                          : errc::io_error;
    return make_error(code, "cluster_client: cannot join the node at " + cfg.join.host + ":" +
                              std::to_string(cfg.join.port) + ": " + describe(peer.error()));
  }
  if (!peer->client_workers.empty())
    return make_error(errc::invalid_argument, "cluster_client: " + cfg.join.host + ":" + std::to_string(cfg.join.port) +
                                                " is another client process, not a node of the job");
  self->send(p->agent, node_joined_atom::value, node_info{peer->node, peer->host, peer->port, peer->agent, 0});
  cfg.log("joined node " + peer->node + " at " + peer->host + ":" + std::to_string(peer->port) + " as a client (" +
          std::to_string(cfg.workers.size()) + " workers' loops), listening on " + cfg.host + ":" +
          std::to_string(p->gate->port()));
  return std::unique_ptr<cluster_client>(new cluster_client(std::move(p)));
}

caf::expected<ps_client> cluster_client::client(uint32_t worker, std::chrono::milliseconds timeout) {
  auto job = impl_->slots->wait_started(worker, timeout);
  if (!job)
    return job.error();
  return ps_client(worker, job->steps, job->training_model, impl_->slots->channel(worker));
}

caf::error cluster_client::wait_released(std::chrono::milliseconds timeout) {
  return impl_->slots->wait_released(timeout);
}

uint16_t cluster_client::port() const {
  return impl_->gate->port();
}

std::string cluster_client::node() const {
  return to_string(impl_->sys->node());
}

}  // namespace keel
