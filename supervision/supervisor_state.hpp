#pragma once
// Internal to supervision/: the state of one supervisor actor and the
// operations its policy (supervisor.cpp) and its stop sequence
// (stop_sequence.cpp) share. Not a public header: everything here runs on
// the supervisor's own thread and assumes it.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "supervision/directory.hpp"
#include "supervision/events.hpp"
#include "supervision/restart_intensity.hpp"
#include "supervision/supervisor.hpp"

namespace keel::supervision::detail {

enum class child_status { idle, running, restart_pending, stopping };

struct child_record {
  child_spec spec;
  caf::actor handle;         // valid while running or stopping
  uint64_t incarnation = 0;  // of the running (or last) incarnation
  child_status status = child_status::idle;
  int consecutive_restarts = 0;  // for backoff
  clock::time_point started_at{};
};

// Children being stopped one at a time, in the order of `queue`.
struct stop_job {
  std::vector<std::string> queue;
  std::string current;       // id being stopped now, "" between children
  uint64_t kill_ticket = 0;  // the timer that kills `current`
  name_state after = name_state::restarting;  // what the directory hears
  bool final = false;        // the supervisor exits when it is done
  std::function<void()> then;
};

// A pending start (child_spec::start_pending) being awaited: what its
// answer completes, and `then`, told the outcome.
struct awaited_start {
  uint64_t ticket = 0;
  restart_context ctx;  // ctx.id: the child
  snapshot_choice choice;
  std::function<void(caf::error)> then;
};

// Children being started one at a time (a supervisor child must answer a
// probe, i.e. have started its own children, before the next one starts).
struct start_job {
  std::vector<std::string> queue;
  bool initial = false;  // the supervisor's own start: a failure ends it
};

struct supervisor_state {
  supervisor_spec spec;
  restart_context services;  // directory, events, clock; supervisor = parent
  std::vector<child_record> children;  // in start order
  std::optional<restart_intensity> intensity;
  std::mt19937_64 rng;
  std::optional<stop_job> stopping;
  std::optional<start_job> starting;
  std::deque<std::function<void()>> deferred;  // arrived while busy()
  std::map<uint64_t, std::vector<std::string>> pending_restarts;  // ticket -> ids
  // The pending start being awaited, if any: the supervisor is busy() until
  // its answer, its error or its timeout.
  std::optional<awaited_start> awaiting_start;
  uint64_t next_ticket = 1;
  bool terminating = false;
  bool exited = false;  // quit() was called
  caf::error exit_reason;
  // Killed when the supervisor dies, whatever the way (it monitors, never links).
  std::shared_ptr<std::vector<caf::actor>> live = std::make_shared<std::vector<caf::actor>>();
  static inline const char* name = "keel.supervisor";
};

using supervisor_actor = caf::stateful_actor<supervisor_state>;

child_record* find(supervisor_actor* self, const std::string& id);
clock::time_point now(supervisor_actor* self);
void publish(supervisor_actor* self, event e);
void announce(supervisor_actor* self, const child_record& c, name_state s);
void forget_live(supervisor_actor* self, const caf::actor& handle);

// True while a start or stop sequence runs; decisions wait until it ends.
bool busy(supervisor_actor* self);

// Runs `f` now, or after the running sequence if busy().
void when_idle(supervisor_actor* self, std::function<void()> f);

// Runs deferred work, in arrival order, until some of it makes us busy again.
void drain_deferred(supervisor_actor* self);

void erase_child(supervisor_actor* self, const std::string& id);

// Starts the next incarnation of child `id` and calls `then` with the
// outcome: monitored, registered and announced on success; on failure
// nothing changed but the error. A start function's outcome comes at once; a
// pending start's when its answer, error or timeout arrives (busy() until
// then, so nothing else changes the children meanwhile).
void start_one(supervisor_actor* self, const std::string& id, std::function<void(caf::error)> then);

// The timer of pending start `ticket` fired (a failed start unless answered).
void on_start_timer(supervisor_actor* self, uint64_t ticket);

// Run-time requests (runtime_requests.cpp); each answers through its promise.
void start_child_from_template(supervisor_actor* self, const std::string& id,
                               caf::typed_response_promise<caf::actor> rp);
void start_child_from_spec(supervisor_actor* self, child_spec spec,
                           caf::typed_response_promise<caf::actor> rp);
void terminate_child_request(supervisor_actor* self, const std::string& id,
                             caf::response_promise rp);
void which_children_request(supervisor_actor* self,
                            caf::typed_response_promise<std::vector<child_info>> rp);

// Stops the running children among `ids`, one at a time in the given order,
// each by its shutdown policy, then runs `then`. Must not be called while
// another stop sequence runs (use when_idle).
void stop_children(supervisor_actor* self, std::vector<std::string> ids, name_state after,
                   std::function<void()> then, bool final = false);

// Handles a child's down_msg that belongs to the running stop sequence;
// returns false if it does not belong to it.
bool on_stop_progress(supervisor_actor* self, const caf::actor_addr& source,
                      const caf::error& reason);

// The kill timer of the running stop sequence fired.
void on_kill_timer(supervisor_actor* self, uint64_t ticket);

}  // namespace keel::supervision::detail
