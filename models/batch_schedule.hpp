#pragma once
// The batch schedule: which training examples a worker uses at each step.
// A batch is a pure function of (seed, epoch, step, worker, num_workers,
// batch_size) and the dataset size: each epoch permutes the examples with a
// keyed_permutation chosen by (seed, epoch) and deals the permuted positions
// round-robin to the workers, so within an epoch the workers' batches are
// disjoint and every worker has the same number of steps. A restarted worker
// recomputes any batch from its position alone; nothing is stored.

#include <caf/error.hpp>
#include <cstdint>
#include <vector>

namespace keel {

// Where a worker is in training. `step` counts from 0 within `epoch`.
struct batch_position {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t step = 0;
  uint32_t worker = 0;
  uint32_t num_workers = 1;
  uint32_t batch_size = 1;
};

// Steps per epoch, the same for every worker: floor(floor(n / num_workers) /
// batch_size). The up to num_workers * batch_size - 1 examples left over in an
// epoch differ from epoch to epoch. Zero when a worker's share is smaller than
// one batch (or an argument is zero).
uint64_t steps_per_epoch(uint64_t num_examples, uint32_t num_workers, uint32_t batch_size);

// An (epoch, step-within-epoch) pair for a worker's global step counter.
struct epoch_step {
  uint64_t epoch = 0;
  uint64_t step = 0;
};

// Splits a global step count (0, 1, 2, ... across epochs) given steps_per_epoch > 0.
epoch_step split_global_step(uint64_t global_step, uint64_t steps_per_epoch);

// Writes the batch's `batch_size` example indices (each below num_examples)
// into `out`, reusing its capacity. Fails with invalid_argument, naming the
// bad field, when num_workers or batch_size is 0, worker >= num_workers, or
// step >= steps_per_epoch(...).
caf::error batch_indices(uint64_t num_examples, const batch_position& at,
                         std::vector<uint64_t>& out);

}  // namespace keel
