#pragma once
// Backoff spaces out the restarts of a child that keeps failing, as Akka's
// BackoffSupervisor does: the n-th consecutive restart waits
// min(max, min_delay * 2^(n-1)) scaled by a random factor in
// [1, 1 + random_factor), and the count starts over once the child has run
// for `reset_after` without failing. The default (min_delay 0) restarts at
// once, as OTP does. Pure arithmetic: the random draw is passed in, so the
// caller decides where randomness comes from. `doubled_delay` is the
// doubling itself, which the actors' retries (a worker's requests, a
// shard's or the checkpointer's writes) use too.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

namespace keel::supervision {

// min(cap, first * 2^min(doublings, max_doublings)), without overflow:
// doubling stops once `cap` is reached. A `cap` below `first` gives `cap`;
// a non-positive `first` is not doubled (min(first, cap)). Pure.
template <class Rep, class Period>
std::chrono::duration<Rep, Period> doubled_delay(std::chrono::duration<Rep, Period> first,
                                                 std::chrono::duration<Rep, Period> cap, uint32_t doublings,
                                                 uint32_t max_doublings = std::numeric_limits<uint32_t>::max()) {
  using duration = std::chrono::duration<Rep, Period>;
  auto d = first;
  for (uint32_t i = 0; i < std::min(doublings, max_doublings) && d > duration::zero() && d < cap; ++i)
    d = d > cap / 2 ? cap : d * 2;
  return std::min(d, cap);
}

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
