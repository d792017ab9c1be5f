#pragma once
// The wait before trying again after `failures` failures in a row:
// retry_min, doubling with each failure (at most 16 times), at most
// retry_max. One formula for a shard rewriting its snapshot file, the
// checkpointer rewriting a manifest and a worker repeating a request; the
// doubling is supervision's (supervision/backoff.hpp). Pure.

#include <chrono>
#include <cstdint>

#include "supervision/backoff.hpp"

namespace keel {

inline std::chrono::milliseconds retry_backoff(std::chrono::milliseconds retry_min,
                                               std::chrono::milliseconds retry_max, uint32_t failures) {
  return supervision::doubled_delay(retry_min, retry_max, failures, 16);
}

}  // namespace keel
