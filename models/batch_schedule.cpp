#include "models/batch_schedule.hpp"

#include <string>

#include "messages/errors.hpp"
#include "models/counter_rng.hpp"
#include "models/keyed_permutation.hpp"

namespace keel {

namespace {

// Stream tag keeping epoch permutations apart from other uses of the seed.
constexpr uint64_t batch_order_stream = 0x62617463686f7264ULL;  // "batchord"

}  // namespace

uint64_t steps_per_epoch(uint64_t num_examples, uint32_t num_workers, uint32_t batch_size) {
  if (num_workers == 0 || batch_size == 0)
    return 0;
  return num_examples / num_workers / batch_size;
}

epoch_step split_global_step(uint64_t global_step, uint64_t steps_per_epoch) {
  if (steps_per_epoch == 0)
    return {};
  return {global_step / steps_per_epoch, global_step % steps_per_epoch};
}

caf::error batch_indices(uint64_t num_examples, const batch_position& at,
                         std::vector<uint64_t>& out) {
  if (at.num_workers == 0)
    return make_error(errc::invalid_argument, "batch_position.num_workers must be at least 1");
  if (at.batch_size == 0)
    return make_error(errc::invalid_argument, "batch_position.batch_size must be at least 1");
  if (at.worker >= at.num_workers)
    return make_error(errc::invalid_argument, "batch_position.worker " + std::to_string(at.worker) +
                                                  " is not below num_workers " +
                                                  std::to_string(at.num_workers));
  const uint64_t steps = steps_per_epoch(num_examples, at.num_workers, at.batch_size);
  if (at.step >= steps)
    return make_error(errc::invalid_argument,
                      "batch_position.step " + std::to_string(at.step) + " is not below the " +
                          std::to_string(steps) + " steps of an epoch (" +
                          std::to_string(num_examples) + " examples, " +
                          std::to_string(at.num_workers) + " workers, batch " +
                          std::to_string(at.batch_size) + ")");
  const keyed_permutation order(num_examples, counter_hash(at.seed, batch_order_stream, at.epoch));
  out.resize(at.batch_size);
  // Worker w owns the permuted positions w, w + W, w + 2W, ...; its step s
  // takes the s-th run of batch_size of them.
  const uint64_t first = at.step * at.batch_size;
  for (uint32_t k = 0; k < at.batch_size; ++k)
    out[k] = order((first + k) * at.num_workers + at.worker);
  return {};
}

}  // namespace keel
