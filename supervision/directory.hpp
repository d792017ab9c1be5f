#pragma once
// The directory maps a child's stable name to the handle of its current
// incarnation. Supervisors register every start, restart and final stop;
// anyone may look a name up, wait (bounded) for it to be up, watch it (the
// watcher gets a directory_update after each change and when the name is gone
// for good), or call it: a call made while the name restarts waits for the new
// incarnation within its budget, is re-sent once if the old incarnation died
// with the call unread in its mailbox, and otherwise ends in an error that names
// the name and why; it is never dropped and never left unanswered.

#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/timespan.hpp>

namespace keel::supervision {

// Mirrors messages/protocol.capnp's DirectoryUpdate.State.
enum class name_state : uint8_t { up, restarting, gone };

const char* to_string(name_state s);

struct directory_update {
  std::string name;
  uint64_t incarnation = 0;  // up: the current one; restarting/gone: the last one
  name_state state = name_state::gone;
  caf::actor handle;         // valid when up
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, directory_update& x) {
  return f(caf::meta::type_name("keel.directory_update"), x.name, x.incarnation, x.state,
           x.handle);
}

// Spawns a directory. It runs until it gets an exit signal or until its owner
// (`owner`, or the actor named by a later (follow_atom, owner) message) is
// down. Waiters and calls still open then get errc::shutting_down.
caf::actor spawn_directory(caf::actor_system& sys, const caf::actor& owner = caf::actor{});

// Blocking helpers for code outside actors (applications, tests, the CLI).
// Each waits at most `timeout`; errors are keel errors naming the name:
// not_found (never registered, or gone), timeout (still restarting).

// The current entry for `name`.
caf::expected<directory_update> lookup(caf::actor_system& sys, const caf::actor& directory,
                                       const std::string& name,
                                       caf::timespan timeout = std::chrono::seconds(5));

// The handle of an incarnation >= min_incarnation, waiting while it restarts.
caf::expected<caf::actor> await_name(caf::actor_system& sys, const caf::actor& directory,
                                     const std::string& name, uint64_t min_incarnation,
                                     caf::timespan timeout);

}  // namespace keel::supervision
