#pragma once
// Which update rule the parameter shards apply, SGD, momentum, AdaGrad,
// Adam or one the application brings (custom_update_rule), and its
// hyperparameters, as a plain value with no CAF in it (so
// plain-value stores such as actors/core/embedding_table.hpp can hold one).
// Parsing and the wire form are in actors/core/optimizer.hpp; the rules
// themselves in actors/core/update_rules.hpp.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace keel {

enum class optimizer_kind { sgd, momentum, adagrad, adam, custom };

// An update rule an application brings (optimizer_kind::custom): `apply`
// updates `n` parameters `p` with the gradient `g` (already times the
// config's gradient_scale) and the rule's state arrays `s1`, `s2` (null
// beyond `slots`), `t` counting the optimizer steps taken so far including
// this one. The state lives beside the parameters in the shard and in its
// snapshots, so a restored shard goes on bit-identically, provided `apply`
// is a pure function of its arguments. Called on a shard's own thread, one
// block at a time (never concurrently for one shard), and it must not
// throw. A custom rule lives in the process that registered it: a job in
// the application's process (not keel cluster, whose shards run elsewhere).
struct custom_update_rule {
  std::string name;           // in the run's configuration (its hash) and in errors
  uint32_t slots = 0;         // state floats per parameter: 0, 1 or 2
  float initial[2] = {0, 0};  // each slot's value for a fresh parameter
  std::function<void(float* p, float* s1, float* s2, const float* g, size_t n, uint64_t t)> apply;
};

// How a step's gradients from several workers combine before the rule
// applies them. Each worker's gradient is the mean over its own batch.
//  - sum: they are added, W times the mean over the step's W x batch
//    examples (keel's rule since its first release; what its MNIST runs use);
//  - mean: their mean, which is the gradient of the step's W x batch
//    examples as one batch: what a single trainer of batch W x batch
//    computes (models/plain_trainer.hpp). Under AdaGrad the two differ in
//    more than the step size: a doubled gradient is an initial accumulator
//    divided by four.
// A job (training_config::combine) gives each shard its optimizer_config
// with gradient_scale as it is (sum) or divided by W (mean).
enum class gradient_combine { sum, mean };

struct optimizer_config {
  optimizer_kind kind = optimizer_kind::sgd;
  float lr = 0.1f;
  float momentum = 0.9f;             // momentum
  float beta1 = 0.9f;                // adam
  float beta2 = 0.999f;              // adam
  float epsilon = 1e-8f;             // adagrad, adam
  float initial_accumulator = 0.1f;  // adagrad
  // Every rule applies gradient_scale x g, g being a push's gradient or a
  // BSP step's sum of its workers' (in worker-id order). 1 leaves g as it
  // is, bit for bit. A job divides it by the number of workers when
  // training_config::combine is mean.
  float gradient_scale = 1.0f;
  // kind custom: the rule (lr and the fields above are the rule's to use or
  // not: `apply` sees only the scaled gradient). Does not cross processes.
  std::shared_ptr<const custom_update_rule> custom;
};

// "sgd", "momentum", "adagrad", "adam" or "custom".
const char* to_string(optimizer_kind k);
// "sum" or "mean".
const char* to_string(gradient_combine c);

}  // namespace keel
