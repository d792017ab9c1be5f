#pragma once
// What a worker tells the job when it has finished its last step: its
// counters over this incarnation. A plain value, registered as a CAF message
// type (keel.worker_report); last_loss crosses processes as its bit pattern.

#include <caf/meta/type_name.hpp>
#include <cstdint>

#include "messages/wire_bits.hpp"

namespace keel {

struct worker_report {
  uint32_t worker = 0;
  uint32_t epoch = 0;
  uint64_t steps = 0;         // global steps completed
  uint64_t pushes_acked = 0;  // pushes acknowledged (each (shard, seq) once)
  uint64_t retries = 0;
  uint64_t skipped_steps = 0;
  uint64_t replayed = 0;  // pushes resent to restarted shards
  double last_loss = 0;
  // Microseconds a step was held back by the checkpoint window (a
  // checkpoint not yet committed): what checkpoints cost this worker in waiting.
  uint64_t window_wait_us = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_report& x) {
  using wire::bits;
  return f(caf::meta::type_name("keel.worker_report"), x.worker, x.epoch, x.steps, x.pushes_acked,
           x.retries, x.skipped_steps, x.replayed, bits(x.last_loss), x.window_wait_us);
}

}  // namespace keel
