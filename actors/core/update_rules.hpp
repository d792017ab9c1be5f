#pragma once
// The update rules a parameter shard applies to its parameters: SGD,
// momentum, AdaGrad, Adam and an application's custom_update_rule (configured by optimizer_config,
// actors/core/optimizer_config.hpp). A rule is a pure function of (parameter, its
// slot state, gradient, step count): its state lives with the parameters in
// the shard and goes into every snapshot, so a restored shard continues
// bit-identically. Not thread-safe; one shard owns its arrays. None throws.

#include <cstddef>
#include <cstdint>

#include "actors/core/optimizer_config.hpp"

namespace keel {

// How many state slots per parameter the rule keeps (0, 1 or 2); a custom
// rule's are its own (slots_of).
size_t slots_per_parameter(optimizer_kind k);
size_t slots_of(const optimizer_config& c);

// The initial value of slot `i` of a fresh parameter.
float initial_slot(const optimizer_config& c, size_t i);

// Applies gradient `g` to `n` parameters `p` with slot arrays `s1`, `s2`
// (null when the rule keeps fewer slots). `t` counts the optimizer steps
// taken so far including this one (t >= 1; Adam's bias correction uses it).
void apply_update(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                  const float* g, size_t n);

// The rule at step `t` with its step-dependent factor (Adam's bias-corrected
// step size, two pow calls) computed once, for a caller that applies the
// same step to many small blocks (the rows of an embedding table):
// apply_prepared(prepare_update(c, t), ...) equals apply_update(c, t, ...)
// bit for bit.
struct prepared_update {
  // The rule, not a copy: a copy of a custom rule's shared_ptr would cost
  // two atomic operations on every apply (a sparse key's is one float).
  // The caller's config outlives the prepared update.
  const optimizer_config* config = nullptr;
  float adam_step = 0;  // lr * sqrt(1 - beta2^t) / (1 - beta1^t), for adam
  uint64_t t = 1;       // for a custom rule
};
prepared_update prepare_update(const optimizer_config& c, uint64_t t);
void apply_prepared(const prepared_update& u, float* p, float* s1, float* s2, const float* g,
                    size_t n);

// The same with the gradient as `n` little-endian floats in bytes (a push's
// values as they sit in its frame), read in place, with no copy first.
void apply_update_bytes(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                        const unsigned char* g, size_t n);

// The most gradients apply_update_sum adds in its one pass.
constexpr size_t max_summed_gradients = 4;

// Applies the sum of `k` gradients, each `n` little-endian floats in bytes,
// in one pass (unrolled for 2 <= k <= max_summed_gradients, a plain loop for
// any other k): the gradient of parameter
// i is ((0 + g[0][i]) + g[1][i]) + ..., added in that order, exactly what
// summing them into a zeroed array first and applying that gives.
void apply_update_sum(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                      const unsigned char* const* g, size_t k, size_t n);

}  // namespace keel
