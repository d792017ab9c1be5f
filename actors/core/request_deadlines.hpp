#pragma once
// The deadlines of an actor's open requests, kept by the actor on one timer.
//
// A CAF 0.17 request with a timeout costs two entries on the actor system's
// clock: one set when it is sent and one cancel when it is answered. An
// entry pushed while the clock's thread waits wakes it through a condition
// variable. A worker makes four to six requests a step, more than a
// thousand steps a second: about 9 000 futex calls in an epoch of MNIST, on
// the two cores that train. Requests made with no CAF timeout and tracked
// here share one timer, armed for the earliest deadline (about once per
// request_timeout while answers come in time); when one is due, the actor
// delivers CAF's own request_timeout error to itself
// (actors/core/request_timer.hpp), so the response handler runs its error path
// and is dropped exactly as on a CAF timeout.
//
// A plain value with no CAF types: ids are the integer values of the
// requests' response ids. Deterministic and single-threaded, like the actor.

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace keel {

class request_deadlines {
 public:
  using clock_type = std::chrono::steady_clock;
  using time_point = clock_type::time_point;

  // Request `id` is due at `due`. Returns the time for which a timer must
  // be armed, when no armed timer fires at or before `due`.
  std::optional<time_point> add(uint64_t id, time_point due);
  // Request `id` was answered (a value or an error): no longer timed. An
  // unknown id (answered after it was due) is ignored.
  void answered(uint64_t id);
  // The armed timer fired at `now`: removes and returns the ids due by then
  // (in the order they were added). `*rearm` is set to the time for which
  // the next timer must be armed, or reset when nothing is open.
  std::vector<uint64_t> fire(time_point now, std::optional<time_point>* rearm);

  size_t open() const { return open_.size(); }

 private:
  struct entry {
    uint64_t id;
    time_point due;
  };
  std::vector<entry> open_;         // in the order added
  std::optional<time_point> timer_;  // when the armed timer fires; none armed
};

}  // namespace keel
