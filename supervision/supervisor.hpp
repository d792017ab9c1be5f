#pragma once
// Supervisors keep a tree of CAF actors running, with Erlang/OTP's semantics
// and names. A supervisor starts its children in order, watches each through
// a monitor, restarts them by strategy and restart type, gives up when they
// fail too often (escalating to its own supervisor), and stops them in reverse
// order. It knows nothing of what its children do: a child is any actor.
//
// The policy, top to bottom (supervisor.cpp implements it in this order):
//
// Start. Children start one by one, in the order of `children`. A child's
//   start function gets a restart_context (id, incarnation, snapshot, the
//   tree's services) and returns the child's handle. If a start fails while
//   the supervisor itself is starting, it stops the children it started (in
//   reverse) and exits with errc::start_failed naming the child: its parent
//   sees that exit like any other failure. The supervisor monitors,
//   never links: whatever way it dies, it kills the children it still has.
//   A start may be pending (child_spec::start_pending): the start function
//   names an actor and a message, and the supervisor awaits the answer, the
//   child's handle, as a message, so that a start placed on another node
//   never blocks its thread. Until the answer (or its error, or the spec's
//   start_timeout on the tree's clock) the supervisor is busy as during any
//   start: the next child in order waits, and downs, restarts and run-time
//   requests that arrive are handled after it. An error answer or a timeout
//   is a failed start, exactly as a start function's error; a handle that
//   answers after the timeout is killed. A start function that blocks runs
//   as a pending start on a thread of its own (own_thread_start.hpp).
//
// A child goes down. The supervisor reports event `down(reason)`, then
//   decides by restart type: permanent children are always restarted,
//   transient ones only after an abnormal exit (not normal or user_shutdown),
//   temporary ones never (and are forgotten). A child that is not restarted
//   is marked `gone` in the directory.
//
// Restart intensity. Each restart decision is counted. More than
//   `max_restarts` within `period` (OTP default: 1 in 5 s) and the supervisor
//   gives up: it reports `escalate`, stops all its children in reverse start
//   order and exits with errc::escalated, naming the child and its last
//   failure. Its own supervisor sees that as a failure of one child; at the
//   root, tree::await() returns that error. A restart that fails in the start
//   function counts as another failure of the same child.
//
// Strategy: which children restart together.
//   one_for_one         only the failed child.
//   one_for_all         all children: the others are stopped (in reverse
//                       order) and all are started again in order.
//   rest_for_one        the failed child and those started after it.
//   simple_one_for_one  a dynamic pool of children made from one template spec
//                       by start_child(id); each restarts on its own.
//   Temporary children stopped by a sibling's failure are not restarted.
//
// Backoff. A child spec may delay its restarts (supervision/backoff.hpp):
//   exponential from min to max with jitter, reset after a quiet period.
//   While it waits the name is `restarting` in the directory. All time comes
//   from the tree's clock (supervision/clock.hpp), which tests replace.
//
// Snapshots. Every start (the first one too) picks the newest candidate of
//   the spec's snapshot source, skipping any the spec's validator rejects.
//   The event `restart(incarnation, from_snapshot)` says which one was used,
//   which were rejected, or that the child started fresh.
//
// Shutdown. On exit_reason::user_shutdown from anyone (its parent, the
//   application), or on giving up, a supervisor stops its children one at a
//   time in reverse start order, each by its shutdown policy (brutal_kill;
//   user_shutdown then kill after a timeout; or user_shutdown and wait, the
//   default for supervisors), reporting `shutdown` for each, then exits.
//
// Everything a supervisor does is reported on the tree's event stream
// (events.hpp) and every start and stop updates the directory (directory.hpp).
//
// A tree, as an application defines it:
//
//   child_spec shard;
//   shard.id = "shard-0";
//   shard.start = [](caf::actor_system& sys, const restart_context& ctx)
//       -> caf::expected<caf::actor> { return sys.spawn(parameter_shard, ctx); };
//   shard.validate = check_snapshot;           // optional
//   shard.backoff.min_delay = 100ms;           // optional
//   supervisor_spec shards{"shards", strategy::one_for_one, 3, 5s};
//   shards.children = {shard};
//   supervisor_spec root{"root", strategy::rest_for_one};
//   root.children = {checkpointer_spec, supervisor_child(shards)};
//   auto t = tree::start(sys, root);           // expected<tree>
//   ...
//   caf::error why = t->await(1h);             // escalated: names child + failure

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/timespan.hpp>

#include "supervision/child_spec.hpp"
#include "supervision/clock.hpp"
#include "supervision/protocol.hpp"

namespace keel::supervision {

enum class strategy { one_for_one, one_for_all, rest_for_one, simple_one_for_one };

struct supervisor_spec {
  std::string name;  // the supervisor's id in its parent and in events
  supervision::strategy strategy = supervision::strategy::one_for_one;
  int max_restarts = 1;                                     // intensity: at most this many
  clock::duration period = std::chrono::seconds(5);         // ... within this window
  uint64_t random_seed = 0;  // for backoff jitter (deterministic per seed)
  // Started in this order. For simple_one_for_one: exactly one template,
  // whose id prefixes nothing (children get the ids given to start_child).
  std::vector<child_spec> children;
};

// A child spec that runs `spec` as a nested supervisor: kind supervisor,
// shutdown infinity, and the parent's directory, events and clock.
child_spec supervisor_child(supervisor_spec spec,
                            restart_type restart = restart_type::permanent);

// Spawns a supervisor with the services (directory, events, clock,
// supervisor = its parent, may be invalid) named in `ctx`. Mostly used
// through tree::start and supervisor_child.
caf::actor spawn_supervisor(caf::actor_system& sys, supervisor_spec spec,
                            const restart_context& ctx);

// The services a tree shares; unset ones are created by tree::start.
struct tree_options {
  std::shared_ptr<supervision::clock> clock;
  caf::actor directory;
  caf::actor events;
};

// A running supervision tree, as the embedding application holds it. Move-
// only. Destroying it asks the root to shut down but does not wait.
class tree {
 public:
  // Starts the root supervisor and waits for it to have started all its
  // children. Fails with the root's exit reason if any child failed to start.
  static caf::expected<tree> start(caf::actor_system& sys, supervisor_spec root,
                                   tree_options options = {},
                                   caf::timespan timeout = std::chrono::seconds(10));

  // Starts the root supervisor and returns at once, for a caller that must
  // not block (an actor). The root starts its children in its init and only
  // then answers which_children_atom: that answer says the tree is up. A
  // child that fails to start ends the root, whose exit reason is the
  // failure (what start() returns); monitor root() to see it.
  static tree launch(caf::actor_system& sys, supervisor_spec root, tree_options options = {});

  tree(tree&&) noexcept;
  tree& operator=(tree&&) noexcept;
  ~tree();

  const caf::actor& root() const { return root_; }
  const caf::actor& directory() const { return directory_; }
  const caf::actor& events() const { return events_; }
  const std::shared_ptr<supervision::clock>& clock() const { return clock_; }

  // Waits up to `timeout` for the root to stop. Returns an empty error after
  // an orderly shutdown, the root's exit reason (errc::escalated naming the
  // child and its last failure) if it gave up, and errc::timeout if it is
  // still running.
  caf::error await(caf::timespan timeout);

  // Asks the root to stop (children in reverse start order) and awaits it.
  caf::error shutdown(caf::timespan timeout);

 private:
  tree() = default;
  caf::actor_system* sys_ = nullptr;
  caf::actor root_;
  caf::actor directory_;
  caf::actor events_;
  std::shared_ptr<supervision::clock> clock_;
};

// Blocking requests to any supervisor of a tree, each bounded by `timeout`.

// simple_one_for_one: starts a child from the template under `id`.
caf::expected<caf::actor> start_child(caf::actor_system& sys, const caf::actor& sup,
                                      const std::string& id,
                                      caf::timespan timeout = std::chrono::seconds(5));

// Other strategies: adds `spec` as the last child and starts it.
caf::expected<caf::actor> start_child(caf::actor_system& sys, const caf::actor& sup,
                                      child_spec spec,
                                      caf::timespan timeout = std::chrono::seconds(5));

// Stops child `id` by its shutdown policy and forgets it (OTP's
// terminate_child followed by delete_child). not_found if there is none.
caf::error terminate_child(caf::actor_system& sys, const caf::actor& sup, const std::string& id,
                           caf::timespan timeout = std::chrono::seconds(5));

// The children in start order.
caf::expected<std::vector<child_info>> which_children(
    caf::actor_system& sys, const caf::actor& sup,
    caf::timespan timeout = std::chrono::seconds(5));

}  // namespace keel::supervision
