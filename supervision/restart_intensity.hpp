#pragma once
// restart_intensity is OTP's "at most N restarts within T seconds" rule for
// one supervisor. Each restart the supervisor is about to make is admitted or
// refused; a refusal means the supervisor must give up (stop its children and
// escalate). It keeps only the timestamps inside the window; not thread-safe
// (one supervisor owns one).

#include <chrono>
#include <cstddef>
#include <deque>

#include "supervision/clock.hpp"

namespace keel::supervision {

class restart_intensity {
 public:
  // OTP's default is 1 restart in 5 seconds.
  restart_intensity(int max_restarts, clock::duration period);

  // Records a restart at `now`. Returns false if it makes more than
  // max_restarts within the last `period` (the restart must not happen).
  bool admit(clock::time_point now);

  // Restarts counted inside the window ending at the last admit().
  size_t recent() const { return stamps_.size(); }

  int max_restarts() const { return max_restarts_; }
  clock::duration period() const { return period_; }

 private:
  int max_restarts_;
  clock::duration period_;
  std::deque<clock::time_point> stamps_;
};

}  // namespace keel::supervision
