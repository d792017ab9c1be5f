#pragma once
// A child_spec tells a supervisor how to start, restart and stop one child,
// with OTP's vocabulary: a stable id, a start function, a restart type, a
// shutdown policy and a kind (worker or supervisor). A child is any CAF actor;
// the supervisor's whole view of it is this spec, the handle the start
// function returned and a monitor on that handle, so a child on another node
// needs nothing more. Specs are values, copied freely; the start function must
// be callable from the supervisor's thread, again for every restart. A
// start that cannot finish at once (a child placed on another node) is a
// pending start: the supervisor asks an actor and awaits its answer as a
// message, never blocking its thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/message.hpp>

#include "supervision/backoff.hpp"
#include "supervision/clock.hpp"
#include "supervision/snapshot.hpp"

namespace keel::supervision {

// permanent: always restarted. transient: restarted only after an abnormal
// exit (any reason but normal or user_shutdown). temporary: never restarted,
// and forgotten by its supervisor once it stops.
enum class restart_type { permanent, transient, temporary };

enum class child_kind { worker, supervisor };

// How a supervisor stops a child: brutal_kill sends exit_reason::kill;
// timeout sends exit_reason::user_shutdown and kills the child if it has not
// stopped after `timeout` (on the supervisor's clock); infinity sends
// user_shutdown and waits as long as it takes (right for a child that is
// itself a supervisor, which stops its own children first).
struct shutdown_policy {
  enum class mode { brutal_kill, timeout, infinity };
  mode how = mode::timeout;
  clock::duration timeout = std::chrono::seconds(5);

  static shutdown_policy brutal_kill() { return {mode::brutal_kill, clock::duration{0}}; }
  static shutdown_policy after(clock::duration t) { return {mode::timeout, t}; }
  static shutdown_policy infinity() { return {mode::infinity, clock::duration{0}}; }
};

// What a start function learns about the start it is asked to make.
struct restart_context {
  std::string id;            // the child's stable id (its directory name)
  uint64_t incarnation = 1;  // 1 for the first start, +1 for each restart
  snapshot from;             // empty: start fresh
  caf::actor directory;      // the tree's directory (may be invalid)
  caf::actor events;         // the tree's event stream (may be invalid)
  std::shared_ptr<supervision::clock> clock;

  bool from_snapshot() const { return static_cast<bool>(from); }
};

// Starts one incarnation and returns its handle. An error (or a thrown
// exception) is a failed start: it counts as a failure of the child.
using start_function =
    std::function<caf::expected<caf::actor>(caf::actor_system&, const restart_context&)>;

// A start that completes later: the supervisor sends `ask` to `answerer`
// and awaits its answer, the child's handle (an actor) or an error. No
// answer within the spec's start_timeout is a failed start.
struct pending_start {
  caf::actor answerer;
  caf::message ask;
};

// Begins one incarnation's start and returns what to await. An error (or a
// thrown exception) here, an error answer or a timeout is a failed start,
// exactly as for a start_function.
using pending_start_function =
    std::function<caf::expected<pending_start>(caf::actor_system&, const restart_context&)>;

struct child_spec {
  std::string id;
  start_function start;
  // Instead of `start` (which it takes precedence over when set): a start
  // the supervisor awaits as a message, bounded by `start_timeout` on the
  // tree's clock. A handle that answers after the timeout is killed.
  pending_start_function start_pending;
  clock::duration start_timeout = std::chrono::seconds(30);
  restart_type restart = restart_type::permanent;
  shutdown_policy shutdown = shutdown_policy::after(std::chrono::seconds(5));
  child_kind kind = child_kind::worker;
  supervision::backoff backoff;       // default: restart at once
  snapshot_source snapshots;          // candidates, newest first (null: always fresh)
  snapshot_validator validate;        // null: every non-empty snapshot is valid
};

}  // namespace keel::supervision

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::supervision::child_spec)
