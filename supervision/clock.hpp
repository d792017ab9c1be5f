#pragma once
// A clock tells a supervisor the time and delivers its timers. Supervisors
// never read std::chrono themselves: restart-intensity windows, backoff delays
// and shutdown timeouts all go through this interface, so a test can install a
// manual_clock and let time move only when it says so. Every implementation is
// thread-safe: supervisors on any scheduler thread may share one clock.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <caf/actor.hpp>
#include <caf/message.hpp>

namespace keel::supervision {

class clock {
 public:
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~clock() = default;

  // The current time on this clock (monotonic).
  virtual time_point now() const = 0;

  // Delivers `msg` to `target`, as an anonymous message, once `delay` has
  // passed on this clock. A target that has died by then never sees it; a
  // timer cannot be cancelled, so receivers tag timers and ignore stale ones.
  virtual void send_later(const caf::actor& target, duration delay, caf::message msg) = 0;
};

// The real monotonic clock; timers go through CAF's own timer service.
std::shared_ptr<clock> make_system_clock();

// A clock that stands still until a test calls advance(). Timers that come
// due are delivered by advance() itself, in due-time order (ties in the order
// they were set), so which timers have fired is a function of the calls a
// test made, never of the machine's speed.
class manual_clock final : public clock {
 public:
  time_point now() const override;
  void send_later(const caf::actor& target, duration delay, caf::message msg) override;

  // Moves time forward by `d` and delivers every timer now due.
  void advance(duration d);

  // Timers set and not yet delivered.
  size_t pending() const;

  // How long until the earliest pending timer is due; nullopt if none.
  std::optional<duration> next_due_in() const;

 private:
  struct timer {
    time_point due;
    uint64_t seq;
    caf::actor target;
    caf::message msg;
  };
  mutable std::mutex mu_;
  time_point now_{};
  uint64_t next_seq_ = 0;
  std::vector<timer> timers_;
};

}  // namespace keel::supervision
