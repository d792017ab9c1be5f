#pragma once
// The messages a supervision tree understands, for actors that talk to a
// supervisor, the directory or the event stream directly (the blocking
// helpers in supervisor.hpp and directory.hpp wrap them). Every reply type
// here is inspectable, so these messages can cross nodes later; snapshots and
// child specs carry functions and memory and stay inside one process.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

namespace keel::supervision {

// Supervisor requests.
using start_child_atom = caf::atom_constant<caf::atom("sv_start")>;   // (id | child_spec) -> actor
using terminate_child_atom = caf::atom_constant<caf::atom("sv_term")>;  // (id) -> ok
using which_children_atom = caf::atom_constant<caf::atom("sv_which")>;  // () -> vector<child_info>
// Supervisor-internal timers and notes to self.
using restart_timer_atom = caf::atom_constant<caf::atom("sv_retry")>;
using kill_timer_atom = caf::atom_constant<caf::atom("sv_kill")>;
using start_failed_atom = caf::atom_constant<caf::atom("sv_fail")>;
using start_timer_atom = caf::atom_constant<caf::atom("sv_await")>;  // (ticket): a pending start's bound

// Directory requests.
using register_atom = caf::atom_constant<caf::atom("dir_put")>;    // (directory_update)
using lookup_atom = caf::atom_constant<caf::atom("dir_get")>;      // (name) -> directory_update
using await_name_atom = caf::atom_constant<caf::atom("dir_await")>;  // (name, min_inc, timespan) -> actor
using watch_atom = caf::atom_constant<caf::atom("dir_watch")>;     // (name); then directory_update...
using unwatch_atom = caf::atom_constant<caf::atom("dir_unwtch")>;  // (name)
using call_atom = caf::atom_constant<caf::atom("dir_call")>;       // (name, timespan, message) -> reply
using wait_expired_atom = caf::atom_constant<caf::atom("dir_tmo")>;

// Directory and event stream: stop once this owner actor is down (after
// handling everything it sent before), e.g. when the tree's root stops.
using follow_atom = caf::atom_constant<caf::atom("sv_follow")>;  // (actor owner)

// Event stream requests.
using subscribe_atom = caf::atom_constant<caf::atom("ev_sub")>;     // () -> ok; then event...
using unsubscribe_atom = caf::atom_constant<caf::atom("ev_unsub")>;

// One child as its supervisor sees it.
struct child_info {
  std::string id;
  uint64_t incarnation = 0;
  bool running = false;
  caf::actor handle;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, child_info& x) {
  return f(caf::meta::type_name("keel.child_info"), x.id, x.incarnation, x.running, x.handle);
}

}  // namespace keel::supervision
