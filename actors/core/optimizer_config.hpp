#pragma once
// Which update rule the parameter shards apply, SGD, momentum, AdaGrad or
// Adam, and its hyperparameters, as a plain value with no CAF in it (so
// plain-value stores such as actors/core/embedding_table.hpp can hold one).
// Parsing and the wire form are in actors/core/optimizer.hpp; the rules
// themselves in actors/core/update_rules.hpp.

namespace keel {

enum class optimizer_kind { sgd, momentum, adagrad, adam };

struct optimizer_config {
  optimizer_kind kind = optimizer_kind::sgd;
  float lr = 0.1f;
  float momentum = 0.9f;             // momentum
  float beta1 = 0.9f;                // adam
  float beta2 = 0.999f;              // adam
  float epsilon = 1e-8f;             // adagrad, adam
  float initial_accumulator = 0.1f;  // adagrad
};

// "sgd", "momentum", "adagrad" or "adam".
const char* to_string(optimizer_kind k);

}  // namespace keel
