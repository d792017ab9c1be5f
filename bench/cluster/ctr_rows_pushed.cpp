// How many embedding rows a CTR run pushes: the model's batch schedule
// (model::batch_indices, as a worker calls it) of `workers` workers, batch `batch`, seed
// `seed`, over the click log's first `train_examples` rows, for `steps`
// global steps; each worker's push at a step carries, for each of the 26
// tables, the distinct keys of its batch (the model's table_keys, what a
// worker pushes: each key goes to exactly the one shard owning it), so the
// rows pushed are the sum of those counts over workers, steps and tables.
// Replays after a failure push rows again: they are not counted (this is
// the training's own count, not the wire's).
// Usage: ctr_rows_pushed MODEL TRAIN_EXAMPLES WORKERS BATCH STEPS [SEED=1]
// (MODEL ctr-lr or ctr-fm; vocabulary and the rest: ctr_config's defaults,
// as `keel train --train-limit` leaves them). Prints
//   rows_pushed R examples E rows_per_example X
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "messages/errors.hpp"
#include "models/batch_schedule.hpp"
#include "models/ctr_model.hpp"

using namespace keel;

namespace {

uint64_t arg(char** argv, int i) {
  return std::strtoull(argv[i], nullptr, 10);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || argc > 7) {
    std::fprintf(stderr, "usage: ctr_rows_pushed MODEL TRAIN_EXAMPLES WORKERS BATCH STEPS [SEED=1]\n");
    return 2;
  }
  const std::string name = argv[1];
  if (name != "ctr-lr" && name != "ctr-fm") {
    std::fprintf(stderr, "ctr_rows_pushed: MODEL must be ctr-lr or ctr-fm, not '%s'\n", name.c_str());
    return 2;
  }
  ctr_config c;
  c.train_examples = arg(argv, 2);
  const auto workers = static_cast<uint32_t>(arg(argv, 3));
  const auto batch = static_cast<uint32_t>(arg(argv, 4));
  const uint64_t steps = arg(argv, 5);
  const uint64_t seed = argc > 6 ? arg(argv, 6) : 1;
  auto made = ctr_model::make(c, name == "ctr-lr" ? 0 : c.fm_factors);
  if (!made) {
    std::fprintf(stderr, "ctr_rows_pushed: %s\n", describe(made.error()).c_str());
    return 2;
  }
  const auto& m = **made;
  const uint64_t spe = steps_per_epoch(c.train_examples, workers, batch);
  if (spe == 0) {
    std::fprintf(stderr, "ctr_rows_pushed: no full batch of %u for %u workers in %llu examples\n", batch,
                 workers, static_cast<unsigned long long>(c.train_examples));
    return 2;
  }
  auto scratch = m.make_scratch();
  std::vector<uint64_t> indices;
  table_key_lists keys;
  uint64_t rows = 0;
  for (uint64_t g = 0; g < steps; ++g) {
    const auto es = split_global_step(g, spe);
    for (uint32_t w = 0; w < workers; ++w) {
      batch_position at{seed, es.epoch, es.step, w, workers, batch};
      if (auto err = m.batch_indices(at, indices)) {
        std::fprintf(stderr, "ctr_rows_pushed: %s\n", describe(err).c_str());
        return 1;
      }
      if (auto err = m.table_keys(span<const uint64_t>(indices.data(), indices.size()), *scratch, keys)) {
        std::fprintf(stderr, "ctr_rows_pushed: %s\n", describe(err).c_str());
        return 1;
      }
      for (auto& k : keys) rows += k.size();
    }
  }
  const uint64_t examples = steps * workers * batch;
  std::printf("rows_pushed %llu examples %llu rows_per_example %.3f\n", static_cast<unsigned long long>(rows),
              static_cast<unsigned long long>(examples),
              static_cast<double>(rows) / static_cast<double>(examples));
  return 0;
}
