#pragma once
// Which update rule the parameter shards apply, SGD, momentum, AdaGrad or
// Adam, and its hyperparameters: part of a job's configuration (public API).
// The rules themselves are in actors/core/update_rules.hpp.

#include <cstddef>
#include <cstdint>
#include <string>

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>

#include "messages/wire_bits.hpp"

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

// The rates cross processes as their bits (messages/wire_bits.hpp).
template <class I>
typename I::result_type inspect(I& f, optimizer_config& x) {
  using wire::bits;
  return f(caf::meta::type_name("keel.optimizer_config"), x.kind, bits(x.lr), bits(x.momentum), bits(x.beta1),
           bits(x.beta2), bits(x.epsilon), bits(x.initial_accumulator));
}

// Parses "sgd", "momentum", "adagrad" or "adam".
caf::expected<optimizer_kind> parse_optimizer(const std::string& name);
const char* to_string(optimizer_kind k);

}  // namespace keel
