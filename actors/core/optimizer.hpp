#pragma once
// Which update rule the parameter shards apply, SGD, momentum, AdaGrad or
// Adam, and its hyperparameters: part of a job's configuration (public API).
// The value itself is in actors/core/optimizer_config.hpp (no CAF); this
// header adds its wire form and its parsing. The rules themselves are in
// actors/core/update_rules.hpp.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/core/optimizer_config.hpp"
#include "messages/wire_bits.hpp"

namespace keel {

// The rates cross processes as their bits (messages/wire_bits.hpp).
template <class I>
typename I::result_type inspect(I& f, optimizer_config& x) {
  using wire::bits;
  return f(caf::meta::type_name("keel.optimizer_config"), x.kind, bits(x.lr), bits(x.momentum), bits(x.beta1),
           bits(x.beta2), bits(x.epsilon), bits(x.initial_accumulator), bits(x.gradient_scale));
}

// Parses "sgd", "momentum", "adagrad" or "adam".
caf::expected<optimizer_kind> parse_optimizer(const std::string& name);

// Parses per-parameter rules (training_config::rules), "NAME=OPTIMIZER[:LR],...",
// e.g. "fc1.weight=adam:0.001,emb=adagrad": each rule is `base` (its
// hyperparameters) with that optimizer and, when given, that learning rate.
// Names are checked against the model by the job. Errors name the bad entry.
caf::expected<std::map<std::string, optimizer_config>> parse_rules(const std::string& text,
                                                                   const optimizer_config& base);

// Parses "sum" or "mean".
caf::expected<gradient_combine> parse_gradient_combine(const std::string& name);

}  // namespace keel
