#include "actors/cluster/node_client.hpp"

#include <unistd.h>

#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "actors/cluster/cluster_gate.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

std::string where(const std::string& host, uint16_t port) {
  return host + ":" + std::to_string(port);
}

// One blocking question with a deadline; a timeout becomes errc::timeout
// naming `what`, any other error is passed on. Not a request: its answer
// comes back as a plain message, so that the down message of `dst`
// (monitored) ends the wait as well. A request sent to a node whose
// connection was already breaking is never answered, and waited for its
// whole timeout (a child's restart racing its node's kill -9 stalled for
// the spawn timeout, 5 s, in about a third of such kills).
template <class Result, class... Ts>
caf::expected<Result> ask(caf::actor_system& sys, const caf::actor& dst, std::chrono::milliseconds timeout,
                          const std::string& what, Ts&&... xs) {
  caf::scoped_actor self{sys};
  self->monitor(dst);
  self->send(dst, std::forward<Ts>(xs)...);
  caf::expected<Result> out = make_error(errc::timeout, what + ": no answer within " + std::to_string(timeout.count()) + " ms");
  self->receive([&](Result& r) { out = std::move(r); },
                [&](caf::error& e) { out = std::move(e); },
                [&](caf::down_msg& d) {
                  out = make_error(errc::shutting_down, what + ": the node is gone (" + sys.render(d.reason) + ")");
                },
                caf::after(timeout) >> [] {});
  return out;
}

node_join_msg join_message(caf::actor_system& sys, const join_identity& me, const std::vector<uint8_t>& challenge,
                           const hmac_digest* proof) {
  return build<schema::NodeJoin>(128, [&](schema::NodeJoin::Builder b) {
    b.setNode(to_string(sys.node()));
    b.setHost(me.host);
    b.setPort(me.port);
    b.setPid(static_cast<uint32_t>(::getpid()));
    b.setRole(me.agent ? schema::NodeJoin::Role::NODE : schema::NodeJoin::Role::CLIENT);
    if (!challenge.empty())
      b.setChallenge(kj::arrayPtr(challenge.data(), challenge.size()));
    if (proof)
      b.setProof(kj::arrayPtr(proof->data(), proof->size()));
  });
}

}  // namespace

void configure_cluster_system(caf::actor_system_config& cfg, const cluster_settings& s) {
  cfg.load<caf::io::middleman>();
  register_node_types(cfg);
  cfg.set("scheduler.max-threads", s.max_threads);
  cfg.set("middleman.heartbeat-interval", caf::timespan{s.heartbeat_interval});
  cfg.set("middleman.connection-timeout", caf::timespan{s.connection_timeout});
  // Messages from peers are deserialized by the middleman's own thread, not
  // by BASP workers on the scheduler: a supervisor's start function blocks
  // its scheduler thread until the node answers a spawn, and with every
  // scheduler thread so blocked (two supervisors restarting at once after a
  // node was lost) the answers were never deserialized. Tested by the
  // cluster tests' `cut` of a node that holds a shard and a worker.
  cfg.set("middleman.workers", size_t{0});
  // With automatic connections CAF opens a listening port of its own (and
  // connects to its peers' ports) past keel's gate (actors/cluster/cluster_gate.hpp).
  // Off is CAF 0.17's default; keel relies on it.
  cfg.set("middleman.enable-automatic-connections", false);
}

void exempt_caf_network_layer_from_leak_checks([[maybe_unused]] caf::actor_system& sys) {
#if defined(__SANITIZE_ADDRESS__)
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  if (basp)
    __lsan_ignore_object(caf::actor_cast<caf::abstract_actor*>(basp));
#endif
}

void forget_unreachable_nodes(caf::actor_system& sys) {
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  if (!basp)
    return;
  // On the multiplexer's thread, where the broker runs: its routing table
  // and proxy registry are not read by anyone else meanwhile. The broker
  // keeps a spawn server for every node it has learned of, reached directly
  // or not, and never forgets one: those are the nodes to look at.
  sys.middleman().backend().dispatch([basp] {
    auto* broker = static_cast<caf::io::basp_broker*>(caf::actor_cast<caf::abstract_actor*>(basp));
    if (broker->getf(caf::abstract_actor::is_terminated_flag))
      return;  // the middleman is going down: its protocol state is gone
    auto& basp_protocol = broker->instance;
    for (auto& [n, spawn_server] : broker->spawn_servers)
      if (n != broker->this_node() && !basp_protocol.tbl().lookup(n) && basp_protocol.proxies().count_proxies(n) > 0)
        basp_protocol.proxies().erase(n);
  });
}

caf::expected<node_handle> connect_node(caf::actor_system& sys, const std::string& host, uint16_t port,
                                        const cluster_secret& secret, std::chrono::milliseconds timeout,
                                        const join_identity& me, const tls_peer& tls) {
  auto at = where(host, port);
  exempt_caf_network_layer_from_leak_checks(sys);
  // The node's gate (actors/cluster/cluster_gate.hpp) hands the connection to CAF
  // only after the secret's challenge. A gate that closed it meanwhile (too
  // many strangers awaiting authentication) or a node only slow to answer
  // (a loaded machine) is asked again until `timeout`, this call's budget.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto gated = connect_through_gate(sys, host, port, secret, timeout, tls);
  while (!gated && (is(gated.error(), errc::io_error) || is(gated.error(), errc::timeout))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // back off, do not spin on a busy gate
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;  // the last attempt's error says best what went wrong
    gated = connect_through_gate(sys, host, port, secret, left, tls);
  }
  if (!gated)
    return gated.error();
  auto agent = &gated->agent;
  auto node_id = gated->node;
  // Step 1: the node proves the secret over our challenge and sends its own.
  auto challenge = random_bytes(32);
  auto reply = ask<node_join_msg>(sys, *agent, timeout, "hello to node at " + at, hello_atom::value,
                                  join_message(sys, me, challenge, nullptr));
  if (!reply)
    return reply.error();
  auto theirs = decode(*reply);
  if (!theirs)
    return make_error(errc::malformed_message, "node at " + at + " answered the hello with " + describe(theirs.error()));
  auto r = theirs->root();
  auto expected = secret.prove(agent_proof_label, challenge.data(), challenge.size(), node_id);
  auto proof = r.getProof();
  if (r.getNode() != node_id || !equal_in_constant_time(proof.begin(), proof.size(), expected.data(), expected.size()))
    return make_error(errc::not_authenticated,
                      "node at " + at + " did not prove the cluster secret (do both sides use the same secret?)");
  uint16_t data_port = r.getDataPort();
  std::vector<uint32_t> client_workers;
  for (auto type : r.getActorTypes()) {
    std::string text(type.cStr(), type.size());
    if (auto w = parse_client_worker_type(text))
      client_workers.push_back(*w);
    else if (text != "shard" && text != "worker" && text != "checkpointer")
      return make_error(errc::invalid_field, "node at " + at + " announced an actor type '" + text +
                                               "' (expected shard, worker, checkpointer or client:worker:N)");
  }
  auto their_challenge = r.getChallenge();
  if (their_challenge.size() != 32)
    return make_error(errc::invalid_field, "node at " + at + " sent a challenge of " +
                                             std::to_string(their_challenge.size()) + " bytes, not 32");
  // Step 2: we prove the secret over its challenge.
  auto mine = secret.prove(peer_proof_label, their_challenge.begin(), their_challenge.size(), to_string(sys.node()));
  auto ok = ask<caf::ok_atom>(sys, *agent, timeout, "join to node at " + at, auth_atom::value,
                              join_message(sys, me, {}, &mine), me.agent);
  if (!ok)
    return ok.error();
  return node_handle{*agent, node_id, host, port, data_port, tls.on() ? tls.name : std::string(),
                     std::move(client_workers)};
}

caf::expected<caf::actor> spawn_on(const node_handle& node, const spawn_request& req,
                                   std::chrono::milliseconds timeout) {
  if (!node.agent)
    return make_error(errc::invalid_argument, "spawn_on: no node (an empty node_handle)");
  return ask<caf::actor>(node.agent->home_system(), node.agent, timeout,
                         "spawn of " + to_string(req.id.kind) + " '" + to_string(req.id) + "' on node at " + where(node.host, node.port),
                         spawn_atom::value, req);
}

caf::expected<std::vector<node_info>> list_nodes(const node_handle& node, std::chrono::milliseconds timeout) {
  if (!node.agent)
    return make_error(errc::invalid_argument, "list_nodes: no node (an empty node_handle)");
  return ask<std::vector<node_info>>(node.agent->home_system(), node.agent, timeout,
                                     "node list of " + where(node.host, node.port), nodes_atom::value);
}

caf::expected<node_status> status_of(const node_handle& node, std::chrono::milliseconds timeout) {
  if (!node.agent)
    return make_error(errc::invalid_argument, "status_of: no node (an empty node_handle)");
  return ask<node_status>(node.agent->home_system(), node.agent, timeout,
                          "status of " + where(node.host, node.port), node_status_atom::value);
}

caf::expected<caf::actor> replica_of(const node_handle& node, std::chrono::milliseconds timeout) {
  if (!node.agent)
    return make_error(errc::invalid_argument, "replica_of: no node (an empty node_handle)");
  return ask<caf::actor>(node.agent->home_system(), node.agent, timeout,
                         "replica of " + where(node.host, node.port), node_replica_atom::value);
}

}  // namespace keel
