#include "supervision/backoff.hpp"

#include <algorithm>

namespace keel::supervision {

std::chrono::nanoseconds backoff::delay(int n, double u) const {
  if (min_delay.count() <= 0 || n < 1)
    return std::chrono::nanoseconds{0};
  auto cap = std::max(max_delay, min_delay);
  // Doubling in integer nanoseconds: stop as soon as the cap is reached so
  // a long failure streak cannot overflow.
  auto d = min_delay;
  for (int i = 1; i < n && d < cap; ++i)
    d = d > cap / 2 ? cap : d * 2;
  d = std::min(d, cap);
  auto jitter = 1.0 + std::max(0.0, random_factor) * std::clamp(u, 0.0, 1.0);
  return std::chrono::nanoseconds{static_cast<int64_t>(static_cast<double>(d.count()) * jitter)};
}

}  // namespace keel::supervision
