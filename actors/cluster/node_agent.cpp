#include "actors/cluster/node_agent.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <set>

#include <caf/all.hpp>

#include "actors/cluster/client_slots.hpp"
#include "actors/cluster/node_client.hpp"
#include "actors/cluster/node_protocol.hpp"
#include "actors/cluster/node_spawn.hpp"
#include "actors/data_plane/data_plane.hpp"
#include "actors/ps/shard_standby.hpp"
#include "actors/ps/snapshot_replica.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

using steady = std::chrono::steady_clock;
using stop_timeout_atom = caf::atom_constant<caf::atom("nd_stopto")>;

// How long a stopping agent waits for its children to go down.
constexpr auto stop_grace = std::chrono::seconds(3);

// An authenticated peer: a node (with an agent we heartbeat) or a client.
struct peer {
  std::string id;
  std::string host;
  uint16_t port = 0;
  caf::actor agent;  // invalid for a client
  steady::time_point last_heartbeat;
  bool live = true;
};

struct agent_state {
  node_agent_config cfg;
  std::string id;
  std::map<caf::node_id, std::vector<uint8_t>> challenges;  // issued, not yet answered
  std::map<caf::node_id, peer> peers;
  std::set<caf::node_id> banned;
  std::map<caf::actor_addr, caf::actor> children;
  // The job a child was spawned for (its directory or job actor) -> the
  // children: when that job's process goes, so do its children.
  std::map<caf::actor_addr, std::vector<caf::actor_addr>> owned;
  node_status stats;
  // The copies of its peers' shards' checkpoints (snapshot_replica.hpp).
  std::shared_ptr<replica_store> replicas;
  caf::actor replica;
  std::shared_ptr<model_cache> models = std::make_shared<model_cache>();  // built for spawns, reused
  // Shards restored ahead of their moves here (actors/ps/shard_standby.hpp),
  // by the pre-copier: a detached actor, so a restore of many megabytes
  // never holds up the agent (its spawns, heartbeats, status).
  std::shared_ptr<shard_standby_store> standby = std::make_shared<shard_standby_store>();
  caf::actor precopier;
  uint64_t heartbeat_seq = 0;
  bool stopping = false;
  caf::error stop_reason;
  static inline const char* name = "keel.node_agent";
};

using agent_actor = caf::stateful_actor<agent_state>;

void log(agent_actor* self, const std::string& line) {
  self->state.cfg.log(line);
}

// What the actors the agent starts get from this node.
node_resources resources(const agent_state& st) {
  return {st.cfg.data_dir, st.cfg.plane, st.replicas, st.models, st.standby, st.cfg.io, st.cfg.clients};
}

// The CAF node of the current message's sender, if it has one.
caf::optional<caf::node_id> sender_node(agent_actor* self) {
  auto& s = self->current_sender();
  if (!s)
    return caf::none;
  return s->node();
}

bool trusted(agent_actor* self, const caf::node_id& n) {
  return n == self->node() || self->state.peers.count(n) > 0;
}

// Refuses `what` from `n`, logging why; nothing else happens.
caf::error refuse(agent_actor* self, const std::string& what, const caf::optional<caf::node_id>& n) {
  ++self->state.stats.refused;
  auto who = n ? to_string(*n) : std::string("<anonymous>");
  std::string why = n && self->state.banned.count(*n) ? "refused for good after sending bad bytes"
                                                       : "not authenticated (no valid proof of the cluster secret)";
  log(self, "refused " + what + " from node " + who + ": " + why);
  return make_error(errc::not_authenticated, "node " + to_string(self->node()) + " refused " + what + ": " + why);
}

// A peer that sent bytes the decoder rejects is never served again.
caf::error ban(agent_actor* self, const caf::node_id& n, const std::string& what, caf::error err) {
  auto& st = self->state;
  st.banned.insert(n);
  st.peers.erase(n);
  st.challenges.erase(n);
  st.stats.banned_peers = st.banned.size();
  log(self, "bad " + what + " from node " + to_string(n) + ": " + describe(err) + "; refusing that node from now on");
  return err;
}

node_join_msg own_join(agent_actor* self, const std::vector<uint8_t>& challenge, const keel::hmac_digest& proof) {
  auto& st = self->state;
  return build<schema::NodeJoin>(128, [&](schema::NodeJoin::Builder b) {
    b.setNode(st.id);
    b.setHost(st.cfg.host);
    b.setPort(st.cfg.port);
    b.setPid(static_cast<uint32_t>(::getpid()));
    if (st.cfg.clients) {
      auto served = st.cfg.clients->workers();
      auto types = b.initActorTypes(static_cast<unsigned>(served.size()));
      for (unsigned i = 0; i < served.size(); ++i)
        types.set(i, client_worker_type(served[i]).c_str());
    } else {
      auto types = b.initActorTypes(3);
      types.set(0, "shard");
      types.set(1, "worker");
      types.set(2, "checkpointer");
    }
    b.setChallenge(kj::arrayPtr(challenge.data(), challenge.size()));
    b.setProof(kj::arrayPtr(proof.data(), proof.size()));
    b.setRole(schema::NodeJoin::Role::NODE);
    b.setDataPort(st.cfg.plane ? st.cfg.plane->port() : 0);
  });
}

caf::result<node_join_msg> on_hello(agent_actor* self, const node_join_msg& m) {
  auto from = sender_node(self);
  if (!from || self->state.banned.count(*from))
    return refuse(self, "hello", from);
  auto join = decode(m);
  if (!join)
    return ban(self, *from, "NodeJoin (hello)", join.error());
  auto challenge = join->root().getChallenge();
  if (challenge.size() != 32)
    return make_error(errc::invalid_field, "keel.NodeJoin.challenge: a hello carries 32 bytes");
  auto nonce = random_bytes(32);
  self->state.challenges[*from] = nonce;
  auto proof = self->state.cfg.secret.prove(agent_proof_label, challenge.begin(), challenge.size(), self->state.id);
  return own_join(self, nonce, proof);
}

caf::result<caf::ok_atom> on_auth(agent_actor* self, const node_join_msg& m, const caf::actor& peer_agent) {
  auto& st = self->state;
  auto from = sender_node(self);
  if (!from || st.banned.count(*from))
    return refuse(self, "join", from);
  auto join = decode(m);
  if (!join)
    return ban(self, *from, "NodeJoin (auth)", join.error());
  auto r = join->root();
  auto it = st.challenges.find(*from);
  if (it == st.challenges.end())
    return refuse(self, "join (no challenge outstanding: send hello first)", from);
  auto nonce = std::move(it->second);
  st.challenges.erase(it);  // single use: a recorded proof cannot be replayed
  auto id = to_string(*from);
  auto expected = st.cfg.secret.prove(peer_proof_label, nonce.data(), nonce.size(), id);
  auto proof = r.getProof();
  if (r.getNode() != id || !equal_in_constant_time(proof.begin(), proof.size(), expected.data(), expected.size())) {
    ++st.stats.refused;
    log(self, "refused join from node " + id + ": wrong proof of the cluster secret");
    return make_error(errc::not_authenticated, "node " + st.id + " refused the join: wrong proof of the cluster secret");
  }
  peer p{id, r.getHost(), r.getPort(), caf::actor{}, steady::now(), true};
  bool is_node = r.getRole() == schema::NodeJoin::Role::NODE && peer_agent && peer_agent.node() == *from;
  if (is_node) {
    p.agent = peer_agent;
    self->monitor(peer_agent);
  }
  st.peers[*from] = std::move(p);
  log(self, std::string(is_node ? "node " : "client ") + id + " joined from " + std::string(r.getHost()) + ":" +
              std::to_string(r.getPort()));
  return caf::ok_atom::value;
}

// The actor of the requesting job a child serves (invalid: none).
caf::actor owner_of(const spawn_request& req) {
  switch (req.id.kind) {
    case actor_kind::shard:
      return req.shard.directory;
    case actor_kind::worker:
      return req.worker.config.job;
    case actor_kind::checkpointer:
      return req.checkpointer.job;
    default:
      return {};
  }
}

caf::result<caf::actor> on_spawn(agent_actor* self, const spawn_request& req) {
  auto& st = self->state;
  auto from = sender_node(self);
  if (!from || !trusted(self, *from))
    return refuse(self, "spawn", from);
  auto what = to_string(req.id.kind) + " '" + to_string(req.id) + "' (incarnation " +
              std::to_string(req.incarnation) + ")";
  if (st.stopping) {
    // stop() has sent its children their exit: a child started now would
    // get none, and run on in a process that is leaving (a client's worker
    // on its closed channel, for ever). The placement tries elsewhere.
    ++st.stats.rejected;
    log(self, "rejected spawn of " + what + " from node " + to_string(*from) + ": this process is stopping");
    return make_error(errc::shutting_down, "spawn of " + what + ": the process is stopping");
  }
  // Spawns run on the agent's thread: their time (the model built here,
  // a shard's restore) is how long a restart or a move placed here waits.
  auto began = std::chrono::steady_clock::now();
  const auto taken = st.standby->taken();
  auto child = start_requested(self->system(), req, resources(st));
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
  if (!child) {
    ++st.stats.rejected;
    log(self, "rejected spawn of " + what + " from node " + to_string(*from) + ": " + describe(child.error()));
    return child.error();
  }
  self->monitor(*child);
  st.children.emplace(child->address(), *child);
  if (auto owner = owner_of(req); owner && owner.node() != self->node()) {
    auto& list = st.owned[owner.address()];
    if (list.empty())
      self->monitor(owner);
    list.push_back(child->address());
  }
  ++st.stats.spawned;
  log(self, "spawned " + what + " for node " + to_string(*from) + " in " + std::to_string(took.count()) + " ms" +
              (st.standby->taken() > taken ? " (from its pre-copy)" : ""));
  return *child;
}

// The pre-copy of a shard about to move here (node_protocol.hpp): checked
// as a spawn is, restored by the pre-copier, answered with its bytes.
caf::result<uint64_t> on_prepare(agent_actor* self, const spawn_request& req) {
  auto from = sender_node(self);
  if (!from || !trusted(self, *from))
    return refuse(self, "pre-copy", from);
  auto rp = self->make_response_promise<uint64_t>();
  auto what = to_string(req.id) + " (checkpoint " +
              (req.shard.restore_from.empty() ? std::string("none") : std::to_string(req.shard.restore_from[0].checkpoint)) + ")";
  auto began = std::chrono::steady_clock::now();
  self->request(self->state.precopier, caf::infinite, node_prepare_atom::value, req)
    .then(
      [=](uint64_t bytes) mutable {
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
        log(self, "pre-copied " + what + ": " + std::to_string(bytes) + " bytes in " + std::to_string(took.count()) + " ms");
        rp.deliver(bytes);
      },
      [=](caf::error& err) mutable {
        log(self, "pre-copy of " + what + " failed: " + describe(err));
        rp.deliver(std::move(err));
      });
  return rp;
}

void on_heartbeat(agent_actor* self, const heartbeat_msg& m) {
  auto& st = self->state;
  auto from = sender_node(self);
  if (!from || !trusted(self, *from)) {
    refuse(self, "heartbeat", from);
    return;
  }
  auto hb = decode(m);
  if (!hb) {
    ban(self, *from, "Heartbeat", hb.error());
    return;
  }
  auto it = st.peers.find(*from);
  if (it == st.peers.end() || hb->root().getNode() != it->second.id)
    return;
  it->second.last_heartbeat = steady::now();
  if (!it->second.live)
    log(self, "node " + it->second.id + " is live again (heartbeat)");
  it->second.live = true;
}

// Sends every joined node a heartbeat and marks silent ones not live.
void on_tick(agent_actor* self) {
  auto& st = self->state;
  auto now = steady::now();
  auto hb = build<schema::Heartbeat>(32, [&](schema::Heartbeat::Builder b) {
    b.setNode(st.id);
    b.setSeq(++st.heartbeat_seq);
    b.setSentUnixMs(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
  });
  for (auto& [n, p] : st.peers) {
    if (!p.agent)
      continue;
    self->send(p.agent, hb);
    auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.last_heartbeat);
    if (p.live && silent > st.cfg.peer_timeout) {
      p.live = false;
      log(self, "node " + p.id + " sent no heartbeat for " + std::to_string(silent.count()) + " ms: not live");
    }
  }
  self->delayed_send(self, st.cfg.heartbeat_interval, caf::tick_atom::value);
}

std::vector<node_info> live_nodes(agent_actor* self) {
  auto& st = self->state;
  std::vector<node_info> out{node_info{st.id, st.cfg.host, st.cfg.port, caf::actor_cast<caf::actor>(self), 0}};
  auto now = steady::now();
  for (auto& [n, p] : st.peers)
    if (p.agent && p.live)
      out.push_back(node_info{
        p.id, p.host, p.port, p.agent,
        std::chrono::duration_cast<std::chrono::milliseconds>(now - p.last_heartbeat).count()});
  return out;
}

void on_down(agent_actor* self, const caf::down_msg& dm) {
  auto& st = self->state;
  if (dm.reason == caf::exit_reason::remote_link_unreachable)
    forget_unreachable_nodes(self->system());
  if (st.children.erase(dm.source) > 0) {
    for (auto& [owner, list] : st.owned)
      list.erase(std::remove(list.begin(), list.end(), dm.source), list.end());
    if (st.stopping && st.children.empty())
      self->quit(st.stop_reason);
    return;
  }
  if (auto it = st.owned.find(dm.source); it != st.owned.end()) {
    // The job's process died or lost us (its connection timed out while this
    // node was stopped): its actors here serve no one, and a job that lives
    // on has restarted them elsewhere.
    size_t stopped = 0;
    for (auto& addr : it->second)
      if (auto c = st.children.find(addr); c != st.children.end()) {
        self->send_exit(c->second, caf::exit_reason::user_shutdown);
        ++stopped;
      }
    if (stopped > 0)
      log(self, "the job of node " + to_string(dm.source.node()) + " is gone (" + to_string(dm.reason) +
                  "): stopping its " + std::to_string(stopped) + " actors here");
    st.owned.erase(it);
    return;
  }
  for (auto it = st.peers.begin(); it != st.peers.end(); ++it)
    if (it->second.agent && it->second.agent.address() == dm.source) {
      log(self, "node " + it->second.id + " (" + it->second.host + ":" + std::to_string(it->second.port) +
                  ") is down: " + to_string(dm.reason));
      st.peers.erase(it);
      return;
    }
}

// Stops the children first and quits once they are down (or after
// stop_grace): a child that ends while CAF's middleman is being torn down
// can be left referenced, and then ~actor_system waits for it for ever.
void stop(agent_actor* self, caf::error reason) {
  auto& st = self->state;
  if (st.children.empty())
    return self->quit(std::move(reason));
  if (st.stopping)
    return;
  st.stopping = true;
  st.stop_reason = std::move(reason);
  // A client process's workers still running when it leaves fail, so that
  // the job restarts them in a client that joins again (cluster_client.hpp).
  caf::error why = st.cfg.clients ? make_error(errc::shutting_down, "its client process left")
                                  : caf::error{caf::exit_reason::user_shutdown};
  for (auto& [addr, child] : st.children)
    self->send_exit(child, why);
  self->delayed_send(self, stop_grace, stop_timeout_atom::value);
}

caf::behavior node_agent(agent_actor* self, node_agent_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.id = to_string(self->node());
  st.stats.node = st.id;
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  self->set_exit_handler([=](caf::exit_msg& em) {
    // Any peer holding the agent's handle can send an exit; only an actor of
    // this process may stop the node. The exit's `source` is message data a
    // peer chooses (CAF's anon_send_exit even fills in the receiver's own
    // address), so the mailbox's sender decides: BASP sets it to a proxy of
    // the peer, and leaves it empty for an anonymous send, which is refused
    // too because a peer's cannot be told apart from a local one (keel node
    // stops the agent with a sourced exit for this reason).
    auto from = sender_node(self);
    if (!from || *from != self->node() || !em.source || em.source.node() != self->node()) {
      ++self->state.stats.refused;
      log(self, "ignored an exit (" + to_string(em.reason) + ") " +
                  (from ? "sent by node " + to_string(*from) : std::string("without a sender")));
      return;
    }
    stop(self, em.reason);
  });
  self->send(self, caf::tick_atom::value);
  st.replicas = st.cfg.replicas ? st.cfg.replicas : std::make_shared<replica_store>();
  st.replica = spawn_snapshot_replica(self->system(), st.replicas);
  self->attach_functor([replica = st.replica](const caf::error&) {
    caf::anon_send_exit(replica, caf::exit_reason::user_shutdown);
  });
  st.precopier = self->spawn<caf::linked + caf::detached>([node = resources(st)](caf::event_based_actor*) -> caf::behavior {
    return {
      [node](node_prepare_atom, const spawn_request& req) { return prepare_requested(req, node); },
    };
  });
  auto local = [=] {
    auto from = sender_node(self);
    return from && *from == self->node();
  };
  return {
    [=](hello_atom, const node_join_msg& m) { return on_hello(self, m); },
    [=](auth_atom, const node_join_msg& m, const caf::actor& a) { return on_auth(self, m, a); },
    [=](spawn_atom, const spawn_request& req) { return on_spawn(self, req); },
    [=](node_prepare_atom, const spawn_request& req) { return on_prepare(self, req); },
    [=](const heartbeat_msg& m) { on_heartbeat(self, m); },
    [=](caf::tick_atom) { on_tick(self); },
    [=](stop_timeout_atom) {
      log(self, std::to_string(self->state.children.size()) + " actors did not stop within " +
                  std::to_string(stop_grace.count()) + " s; stopping anyway");
      self->quit(self->state.stop_reason);
    },
    [=](nodes_atom) -> caf::result<std::vector<node_info>> {
      auto from = sender_node(self);
      if (!from || !trusted(self, *from))
        return refuse(self, "node list", from);
      return live_nodes(self);
    },
    [=](node_routes_atom, const std::vector<data_route>& routes) -> caf::result<caf::ok_atom> {
      auto from = sender_node(self);
      if (!from || !trusted(self, *from))
        return refuse(self, "data plane routes", from);
      if (auto err = check_routes(routes, "nd_routes")) {
        log(self, "refused data plane routes from node " + to_string(*from) + ": " + describe(err));
        return err;
      }
      if (auto& plane = self->state.cfg.plane)
        for (auto& r : routes) plane->add_route(r.node, r.host, r.port, r.tls_name);
      log(self, "data plane routes from node " + to_string(*from) + ": " + std::to_string(routes.size()) + " nodes");
      return caf::ok_atom::value;
    },
    [=](node_status_atom) -> caf::result<node_status> {
      auto from = sender_node(self);
      if (!from || !trusted(self, *from))
        return refuse(self, "status", from);
      auto s = self->state.stats;
      s.children = self->state.children.size();
      s.replica_bytes = self->state.replicas->bytes();
      s.replica_files = self->state.replicas->files();
      return s;
    },
    [=](node_replica_atom) -> caf::result<caf::actor> {
      auto from = sender_node(self);
      if (!from || !trusted(self, *from))
        return refuse(self, "replica", from);
      return self->state.replica;
    },
    [=](node_listening_atom, uint16_t port) {
      if (local())
        self->state.cfg.port = port;
    },
    [=](node_joined_atom, const node_info& n) {
      if (!local() || !n.agent)
        return;
      self->monitor(n.agent);
      self->state.peers[n.agent.node()] = peer{n.node, n.host, n.port, n.agent, steady::now(), true};
    },
  };
}

}  // namespace

caf::expected<caf::actor> spawn_node_agent(caf::actor_system& sys, node_agent_config cfg) {
  if (cfg.secret.empty())
    return make_error(errc::invalid_argument, "a node agent needs a cluster secret");
  if (cfg.heartbeat_interval.count() <= 0 || cfg.peer_timeout.count() <= 0)
    return make_error(errc::invalid_argument, "heartbeat interval and peer timeout must be positive");
  if (!cfg.log)
    cfg.log = [](const std::string& line) { std::cerr << "keel node: " + line + "\n" << std::flush; };
  return sys.spawn(node_agent, std::move(cfg));
}

}  // namespace keel
