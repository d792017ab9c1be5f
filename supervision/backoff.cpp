#include "supervision/backoff.hpp"

#include <algorithm>

namespace keel::supervision {

std::chrono::nanoseconds backoff::delay(int n, double u) const {
  if (min_delay.count() <= 0 || n < 1)
    return std::chrono::nanoseconds{0};
  auto d = doubled_delay(min_delay, std::max(max_delay, min_delay), static_cast<uint32_t>(n - 1));
  auto jitter = 1.0 + std::max(0.0, random_factor) * std::clamp(u, 0.0, 1.0);
  return std::chrono::nanoseconds{static_cast<int64_t>(static_cast<double>(d.count()) * jitter)};
}

}  // namespace keel::supervision
