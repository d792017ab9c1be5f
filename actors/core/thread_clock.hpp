#pragma once
// The CPU time the calling thread has used, in microseconds: what a write
// cost its writer's thread (a shard's snapshot_writer, the checkpointer's
// manifest writes), beside the wall time.

#include <time.h>

#include <cstdint>

namespace keel {

inline int64_t thread_cpu_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace keel
