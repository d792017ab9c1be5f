#pragma once
// What cluster_placement's parts share (private to actors/cluster): the
// state behind one lock, which the placement's calls (supervisor threads),
// its node watcher (an actor) and its membership changes
// (cluster_membership.cpp) read and change.

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/message.hpp>

#include "actors/cluster/cluster_placement.hpp"
#include "actors/cluster/move_plan.hpp"
#include "actors/cluster/placement_policy.hpp"
#include "actors/core/job_event.hpp"

namespace keel {

using reconnect_atom = caf::atom_constant<caf::atom("reconnect")>;   // try lost nodes again
using next_move_atom = caf::atom_constant<caf::atom("nextmove")>;    // start the next move, if none runs
using watch_node_atom = caf::atom_constant<caf::atom("watchnode")>;  // (agent): monitor a joined node
using discover_atom = caf::atom_constant<caf::atom("discover")>;     // look for nodes that joined a member
using add_node_atom = caf::atom_constant<caf::atom("addnode")>;      // (ticket, host, port, tls name): add_node_to
using pre_copy_done_atom = caf::atom_constant<caf::atom("precopied")>;  // (child, why): stop it for its move
using ask_workers_atom = caf::atom_constant<caf::atom("askwrkrs")>;     // (ticket, request): ask_job_workers

struct cluster_placement::state {
  mutable std::mutex mtx;
  std::condition_variable changed;  // a node came back, or an add_node ended
  // Since when no node has taken children (every one lost or draining), as
  // a child's start found (cleared by the next start that finds one):
  // cluster_placement_config::node_wait.
  std::optional<std::chrono::steady_clock::time_point> none_live_since;
  // The same for a worker whose loop runs in a client process: since when
  // no client serving it has been live (node_wait again); and for one of
  // keel's own workers with worker_slots, since when no live node has had
  // a free slot for it.
  std::map<actor_id, std::chrono::steady_clock::time_point> unplaced_since;
  uint32_t discover_next = 0;  // the member the discoverer asks next (they take turns)
  cluster_placement_config cfg;     // cfg.nodes grows with joins
  std::vector<node_handle> handles;  // by node index
  placement_policy policy{0};        // which node is live, what runs where
  std::vector<caf::actor> replicas;  // by node index, with peer_copy (invalid: not known)
  std::map<actor_id, int> peer_of;   // shard -> the node its copies go to (-1: none)
  caf::actor job;
  caf::actor watcher;
  caf::actor discoverer;  // asks a member which nodes joined it (keel node --join)
  caf::actor_system* sys = nullptr;  // the job's, once attached
  // Membership changes (moves, drains, released nodes): a pure plan
  // (move_plan.hpp) that cluster_membership.cpp carries out.
  move_plan plan;
  // add_node's requests to the discoverer and their outcomes (`changed`
  // is notified when one is in).
  uint64_t last_add_ticket = 0;
  std::map<uint64_t, caf::error> added;
  // change_workers' requests to the job, through the discoverer, and their answers.
  std::map<uint64_t, caf::expected<uint64_t>> workers_changed;
  bool detached = false;  // the job ended: nothing joins any more
  // For pre-copies: each shard's last spawn request (without its initial
  // values) and its newest committed snapshot.
  std::map<actor_id, spawn_request> shard_requests;
  std::map<actor_id, snapshot_ref> newest_refs;
  caf::actor_addr pre_copier;  // the helper running a pre-copy, if any (killed when the job ends)

  std::string node_name(uint32_t i) const { return to_string(actor_id::node(i)); }

  // The peer of node i: the first live node after it (-1: none), not a
  // client process. Locked.
  int peer_node(uint32_t i) const {
    auto n = policy.nodes();
    for (uint32_t k = 1; k < n; ++k)
      if (policy.alive((i + k) % n) && !policy.client((i + k) % n))
        return static_cast<int>((i + k) % n);
    return -1;
  }
};

using state_ptr = std::shared_ptr<cluster_placement::state>;

// An event about node `node` for the job's timeline.
void tell_job(const state_ptr& st, event_kind kind, uint32_t node, std::string detail,
              std::string children = {});

// Every live node's data plane address.
std::vector<data_route> routes_of(const state_ptr& st);
// Tells every live node where the others' data planes are now.
void tell_routes(caf::actor_system& sys, const state_ptr& st);

// Asks the job, through the discoverer, to change its workers: `request` is
// (workers_atom, items) as job::change_workers takes them, or
// (worker_lost_atom, W): no node can run W; `what` names it in errors.
// Waits up to `timeout` for its answer (any thread but the discoverer's).
caf::expected<uint64_t> ask_job_workers(const state_ptr& st, caf::message request, const std::string& what,
                                        std::chrono::milliseconds timeout);

// cluster_membership.cpp: on the watcher's thread, starts the next pending
// move unless one runs (it asks the job to stop the child; the child's next
// start ends it), and releases drained nodes with nothing left on them.
void start_next_move(caf::event_based_actor* self, const state_ptr& st);

// A child started: if a move stopped it, returns why (any thread); the move
// ends once settled (move_plan).
std::optional<std::string> move_started(const state_ptr& st, actor_id child);

// Connects to the node at `address` (authenticated as every node), adds it
// to the running job and queues the moves that balance the cluster
// (blocks for the connection; any thread but the watcher's own requests).
caf::error add_node_to(const state_ptr& st, const node_address& address);

// cluster_watcher.cpp: the watcher actor's behavior: every node's agent
// monitored, lost nodes tried again, membership moves run (detached:
// reconnecting blocks).
caf::behavior node_watcher(caf::event_based_actor* self, state_ptr st);

// On the watcher's thread: asks a live node which nodes joined it (keel node
// --join) and adds every one the job does not know yet; one that cannot be
// added is an event and is not asked about again.
void discover_joined(const state_ptr& st);

// Begins the drains that waited for a node to move to, now that one is
// live (a node came back or joined).
void resume_pending_drains(const state_ptr& st);

// A child left `node` (or `node` came back): if it drains, the watcher
// checks whether it can be let go now.
void poke_if_left_drained(const state_ptr& st, std::optional<uint32_t> node);

// cluster_membership.cpp, on the watcher: asks the job to stop the child of
// move `m` (its pre-copy done); its restart ends the move.
void stop_for_move(caf::event_based_actor* self, const state_ptr& st, const pending_move& m, const caf::actor& job);

// cluster_precopy.cpp: a shard's pre-copy before its move: the node it goes
// to and the request that restores its newest committed chain there.
struct pre_copy {
  uint32_t node = 0;
  spawn_request req;
};
// The pre-copy of move `m` (locked), or none; pins the node it goes to.
std::optional<pre_copy> pre_copy_of(cluster_placement::state& st, const pending_move& m);
// Runs `p` on a helper actor; the watcher (`self`) hears pre_copy_done_atom
// when it is done or failed.
void start_pre_copy(caf::event_based_actor* self, const state_ptr& st, const pending_move& m, pre_copy p);

}  // namespace keel
