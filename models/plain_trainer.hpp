#pragma once
// The plain trainer trains any model with plain minibatch SGD (or AdaGrad) in the calling
// thread, with no actors: the single-worker loop of model.hpp with the
// parameters in two local vectors and w -= lr * g applied in place. It is
// the reference keel's distributed runs are measured against (the accuracy
// a model reaches, the samples/s ceiling in bench/) and runs the same batch
// schedule as worker 0 of 1. A step whose loss or gradient is not finite is
// skipped and counted, as keel's workers do. Errors from the model (bad
// config, wrong sizes) are returned, never thrown.
//
// A model with embedding tables has each table in a plain_table: a
// std::unordered_map from key to row number over one arena of rows, a row
// created from model::initial_rows on its first touch. A step pulls the
// batch's rows into a view (as a worker does), takes the gradient and
// applies w -= lr * g to the dense values and to the touched rows. A model
// that evaluates_slices() is scored slice by slice (slices of
// eval_slice_examples), reading only the rows each slice needs (a row no
// step touched is its initial value, not stored), the parts merged.
//
// Reference figures (tests/models/baseline_slow_test.cpp, `ctest -L slow`;
// Release build, one core of this project's 2-vCPU VM, seed 1):
//   mnist-mlp      lr 0.1, batch 32, 8 epochs:  test accuracy 0.9787,
//                  log loss 0.0735, 9.9 s (48k examples/s)
//   mnist-softmax  lr 0.05, batch 32, 10 epochs: accuracy 0.9231,
//                  log loss 0.2753, 2.2 s (270k examples/s)
//   sparse-lr      lr 0.2, batch 64, 2 epochs of 500k rows: log loss 0.3047
//                  vs w*'s 0.2946 (+3.4%), 15.8 s (63k rows/s)
//   Fashion-MNIST, same settings: MLP 0.873, softmax 0.842.
//   ctr-lr, ctr-fm (default ctr_config: 1M training rows, 100k test rows,
//                  10^7 IDs a field) AdaGrad lr 1, batch 256, 1 epoch:
//                  log loss 0.4628 and 0.4635, AUC 0.7788 and 0.7779, against
//                  the planted model's (Bayes) 0.4348 and 0.8117 and the base
//                  rate's entropy 0.5606 (tests/models/ctr_slow_test.cpp;
//                  examples/s: bench/training/ctr_plain_bench).

#include <caf/expected.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "models/model.hpp"

namespace keel {

// The update rule: w -= lr * g, or AdaGrad (acc += g^2, w -= lr * g /
// (sqrt(acc) + epsilon), acc starting at initial_accumulator), the rules
// keel's shards apply under those names.
enum class plain_optimizer { sgd, adagrad };

struct plain_trainer_config {
  uint64_t seed = 1;  // initial parameters and batch order
  float lr = 0.1f;    // constant learning rate
  plain_optimizer optimizer = plain_optimizer::sgd;
  float initial_accumulator = 0.1f;  // adagrad
  float epsilon = 1e-8f;             // adagrad
  uint32_t batch_size = 32;
  uint64_t epochs = 1;
  uint64_t max_steps = 0;  // stop after this many steps in all (0 = no limit)
  bool evaluate_each_epoch = false;
  uint64_t eval_slice_examples = 8192;  // slice size when the model evaluates by slices
};

// One embedding table as the plain trainer holds it.
struct plain_table {
  uint32_t dim = 0;
  std::unordered_map<uint64_t, uint64_t> index;  // key -> row number
  std::vector<float> rows;                       // row r is rows[r * dim, (r + 1) * dim)
  std::vector<float> accumulators;  // AdaGrad's, aligned with rows (empty under SGD)

  // The row of `key`, or nullptr when no step has touched it.
  const float* find(uint64_t key) const;
};

// What one epoch did. `test` is set when evaluate_each_epoch is.
struct plain_epoch {
  uint64_t epoch = 0;
  uint64_t steps = 0;
  double mean_train_loss = 0;  // mean batch loss of the applied (finite) steps
  double train_seconds = 0;
  std::optional<evaluation> test;
};

struct plain_training_result {
  std::vector<float> dense;   // final parameters (layout order)
  std::vector<float> sparse;  // final sparse parameters, index = key
  std::vector<plain_table> tables;  // final rows of each table of the layout
  uint64_t steps = 0;
  uint64_t examples = 0;       // examples in applied steps
  uint64_t skipped_steps = 0;  // non-finite steps not applied
  double train_seconds = 0;    // training time, evaluations excluded
  double examples_per_second = 0;
  std::vector<plain_epoch> epochs;
  evaluation final_test;  // the model's evaluation of the final parameters
};

// Called after each epoch (for progress lines); may be empty.
using plain_epoch_callback = std::function<void(const plain_epoch&)>;

// Trains `m` from its initial parameters (seed) for config.epochs epochs or
// max_steps steps, then evaluates. Fails with invalid_argument when the batch
// size is 0 or larger than the training set, or with the model's error.
caf::expected<plain_training_result> train_plain(const model& m, const plain_trainer_config& config,
                                                 const plain_epoch_callback& on_epoch = {});

}  // namespace keel
