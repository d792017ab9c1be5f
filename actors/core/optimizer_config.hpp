#pragma once
// Which update rule the parameter shards apply, SGD, momentum, AdaGrad or
// Adam, and its hyperparameters, as a plain value with no CAF in it (so
// plain-value stores such as actors/core/embedding_table.hpp can hold one).
// Parsing and the wire form are in actors/core/optimizer.hpp; the rules
// themselves in actors/core/update_rules.hpp.

namespace keel {

enum class optimizer_kind { sgd, momentum, adagrad, adam };

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
};

// "sgd", "momentum", "adagrad" or "adam".
const char* to_string(optimizer_kind k);
// "sum" or "mean".
const char* to_string(gradient_combine c);

}  // namespace keel
