#pragma once
// What a worker tells the job: after each step, a step_report (the job's
// progress and checkpoint window follow these); when it has finished its last
// step, a worker_report, its counters over this incarnation. Plain values,
// registered as CAF message types (keel.step_report, keel.worker_report);
// their losses cross processes as bit patterns (messages/wire_bits.hpp).

#include <caf/meta/type_name.hpp>
#include <cstdint>

#include "messages/wire_bits.hpp"

namespace keel {

struct step_report {
  uint32_t epoch = 0;   // the tree incarnation the worker belongs to (job rollbacks)
  uint32_t worker = 0;
  uint64_t step = 0;    // global steps completed
  double loss = 0;      // the training loss of the step just completed
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  using wire::bits;
  return f(caf::meta::type_name("keel.step_report"), x.epoch, x.worker, x.step, bits(x.loss));
}

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
  // The most bytes its replay log held at once (worker_core's Backpressure).
  uint64_t peak_log_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_report& x) {
  using wire::bits;
  return f(caf::meta::type_name("keel.worker_report"), x.worker, x.epoch, x.steps, x.pushes_acked,
           x.retries, x.skipped_steps, x.replayed, bits(x.last_loss), x.window_wait_us,
           x.peak_log_bytes);
}

}  // namespace keel
