// A shard's move, live (cluster_membership.cpp): before the move stops the
// shard, the node it goes to restores the shard's newest committed chain
// while it still serves (node_prepare_atom; actors/ps/shard_standby.hpp),
// and the restart there takes that state.
#include <algorithm>
#include <chrono>

#include <caf/all.hpp>

#include "actors/cluster/cluster_placement_state.hpp"
#include "actors/core/atoms.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

// Whether a restart from `newer` can take a pre-copy of `copied`: the
// same chain, as long or longer (the newer deltas are applied then).
bool extends(const snapshot_ref& newer, const snapshot_ref& copied) {
  return chain_starts_with(chain_files(newer), chain_files(copied));
}

// How many times a pre-copy is made again when a new base was committed
// while it ran (the restart could not take it).
constexpr int pre_copy_attempts = 3;

// The pre-copy of move `m` (attempt `attempt`), run on `h`, a short-lived
// helper actor: node `node` restores the shard's newest chain (`req`) while
// the shard serves on; made again if a new base was committed meanwhile.
// When it is done, or failed (the restart then reads the chain itself), the
// watcher hears (pre_copy_done_atom) and stops the shard for the move. Not
// on the watcher itself: a detached actor that has sent a request to a
// remote node can stay referenced, and the actor system's end waits for a
// detached actor to be destroyed (a hang seen at the end of chaos runs).
void pre_copy_on(caf::event_based_actor* h, const state_ptr& st, const pending_move& m, uint32_t node,
                 spawn_request req, int attempt, const caf::actor_addr& watcher) {
  auto done = [h, m, watcher] {
    if (auto w = caf::actor_cast<caf::actor>(watcher))
      caf::anon_send(w, pre_copy_done_atom::value, m.child, m.why);
    h->quit();
  };
  caf::actor agent;
  {
    std::lock_guard<std::mutex> guard(st->mtx);
    if (node < st->handles.size())
      agent = st->handles[node].agent;
  }
  if (!agent)
    return done();
  auto copied = req.shard.restore_from[0];
  auto what = to_string(m.child) + " (checkpoint " + std::to_string(copied.checkpoint) + ")";
  if (attempt == 1) {
    // A node lost mid-prepare never answers (its connection is gone): the
    // move goes on at once, not after pre_copy_timeout, which could
    // outlast the run and leave a drained node never released.
    h->monitor(agent);
    h->set_down_handler([st, what, node, done](caf::down_msg&) {
      tell_job(st, event_kind::membership, node,
               "pre-copy of " + what + " failed: " + st->node_name(node) +
                 " was lost; the move restores from the directory");
      done();
    });
  }
  auto began = std::chrono::steady_clock::now();
  h->request(agent, st->cfg.pre_copy_timeout, node_prepare_atom::value, req)
    .then(
      [h, st, m, node, req, began, what, attempt, copied, watcher, done](uint64_t bytes) mutable {
        auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
        tell_job(st, event_kind::membership, node,
                 "pre-copied " + what + ": " + readable_bytes(bytes) + " restored in " + std::to_string(took.count()) +
                   " ms while it served");
        std::optional<snapshot_ref> newest;
        {
          std::lock_guard<std::mutex> guard(st->mtx);
          if (auto it = st->newest_refs.find(m.child); it != st->newest_refs.end())
            newest = it->second;
        }
        if (newest && !extends(*newest, copied) && attempt < pre_copy_attempts) {
          req.shard.restore_from = {*newest};
          return pre_copy_on(h, st, m, node, std::move(req), attempt + 1, watcher);
        }
        done();
      },
      [st, what, node, done](caf::error& err) {
        tell_job(st, event_kind::membership, node,
                 "pre-copy of " + what + " failed: " + describe(err) + "; the move restores from the directory");
        done();
      });
}

}  // namespace

// The pre-copy of move `m` (locked), when pre-copies are on, `m` moves a
// shard that has a committed checkpoint, and a node takes it. The node is
// pinned so that the restart goes there: the move's target, or for a drain
// the best candidate now.
std::optional<pre_copy> pre_copy_of(cluster_placement::state& st, const pending_move& m) {
  if (!st.cfg.pre_copy || m.child.kind != actor_kind::shard)
    return std::nullopt;
  auto req = st.shard_requests.find(m.child);
  auto ref = st.newest_refs.find(m.child);
  if (req == st.shard_requests.end() || ref == st.newest_refs.end())
    return std::nullopt;
  auto to = m.to;
  if (!to) {
    auto order = st.policy.candidates(m.child, 2, m.child.index);
    if (order.empty())
      return std::nullopt;
    to = order.front();
  }
  if (*to >= st.handles.size() || !st.handles[*to].agent || !st.policy.eligible(*to))
    return std::nullopt;
  st.plan.pin(m.child, *to);
  pre_copy p{*to, req->second};
  p.req.shard.restore_from = {ref->second};
  return p;
}

void start_pre_copy(caf::event_based_actor* self, const state_ptr& st, const pending_move& m, pre_copy p) {
  auto watcher = caf::actor_cast<caf::actor_addr>(self);
  auto helper = self->spawn([st, m, node = p.node, req = std::move(p.req),
                             watcher](caf::event_based_actor* h) mutable -> caf::behavior {
    pre_copy_on(h, st, m, node, std::move(req), 1, watcher);
    return {[](caf::ok_atom) {}};  // it only waits for the node's answers
  });
  std::lock_guard<std::mutex> guard(st->mtx);
  st->pre_copier = helper.address();
}

}  // namespace keel
