#pragma once
// Which update rule the parameter shards apply, SGD, momentum, AdaGrad or
// Adam, and its hyperparameters: part of a job's configuration (public API).
// The rules themselves are in actors/core/update_rules.hpp.

#include <cstddef>
#include <cstdint>
#include <string>

#include <caf/expected.hpp>

namespace keel {

enum class optimizer_kind { sgd, momentum, adagrad, adam };

struct optimizer_config {
  optimizer_kind kind = optimizer_kind::sgd;
  float lr = 0.1f;
  float momentum = 0.9f;      // momentum
  float beta1 = 0.9f;         // adam
  float beta2 = 0.999f;       // adam
  float epsilon = 1e-8f;      // adagrad, adam
  float initial_accumulator = 0.1f;  // adagrad
};

// Parses "sgd", "momentum", "adagrad" or "adam".
caf::expected<optimizer_kind> parse_optimizer(const std::string& name);
const char* to_string(optimizer_kind k);

}  // namespace keel
