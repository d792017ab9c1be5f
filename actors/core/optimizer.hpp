#pragma once
// The update rules a parameter shard applies to its parameters: SGD,
// momentum, AdaGrad and Adam. An optimizer is a pure function of (parameter,
// its slot state, gradient, step count): its state lives with the parameters
// in the shard and goes into every snapshot, so a restored shard continues
// bit-identically. Not thread-safe; one shard owns one optimizer.

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

// How many state slots per parameter the rule keeps (0, 1 or 2).
size_t slots_per_parameter(optimizer_kind k);

// The initial value of slot `i` of a fresh parameter.
float initial_slot(const optimizer_config& c, size_t i);

// Applies gradient `g` to `n` parameters `p` with slot arrays `s1`, `s2`
// (null when the rule keeps fewer slots). `t` counts the optimizer steps
// taken so far including this one (t >= 1; Adam's bias correction uses it).
void apply_update(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                  const float* g, size_t n);

// The same with the gradient as `n` little-endian floats in bytes (a push's
// values as they sit in its frame), read in place, with no copy first.
void apply_update_bytes(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                        const unsigned char* g, size_t n);

// The most gradients apply_update_sum adds in its one pass.
constexpr size_t max_summed_gradients = 4;

// Applies the sum of `k` gradients (2 <= k <= max_summed_gradients), each
// `n` little-endian floats in bytes, in one pass: the gradient of parameter
// i is ((0 + g[0][i]) + g[1][i]) + ..., added in that order, exactly what
// summing them into a zeroed array first and applying that gives.
void apply_update_sum(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                      const unsigned char* const* g, size_t k, size_t n);

}  // namespace keel
