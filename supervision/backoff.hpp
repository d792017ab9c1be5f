#pragma once
// Backoff spaces out the restarts of a child that keeps failing, as Akka's
// BackoffSupervisor does: the n-th consecutive restart waits
// min(max, min_delay * 2^(n-1)) scaled by a random factor in
// [1, 1 + random_factor), and the count starts over once the child has run
// for `reset_after` without failing. The default (min_delay 0) restarts at
// once, as OTP does. Pure arithmetic: the random draw is passed in, so the
// caller decides where randomness comes from.

#include <chrono>

namespace keel::supervision {

struct backoff {
  std::chrono::nanoseconds min_delay{0};
  std::chrono::nanoseconds max_delay{0};  // cap before jitter; 0 means min_delay
  double random_factor = 0.0;             // jitter: delay *= 1 + random_factor * u
  std::chrono::nanoseconds reset_after{std::chrono::seconds(10)};

  // The delay before consecutive restart number `n` (n >= 1), given a
  // uniform draw `u` in [0, 1). Zero when min_delay is zero.
  std::chrono::nanoseconds delay(int n, double u) const;
};

}  // namespace keel::supervision
