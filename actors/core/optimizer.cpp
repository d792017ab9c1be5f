#include "actors/core/optimizer.hpp"
#include "actors/core/update_rules.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "messages/errors.hpp"

namespace keel {

caf::expected<optimizer_kind> parse_optimizer(const std::string& name) {
  if (name == "sgd")
    return optimizer_kind::sgd;
  if (name == "momentum")
    return optimizer_kind::momentum;
  if (name == "adagrad")
    return optimizer_kind::adagrad;
  if (name == "adam")
    return optimizer_kind::adam;
  return make_error(errc::invalid_argument,
                    "unknown optimizer '" + name + "' (expected sgd, momentum, adagrad or adam)");
}

caf::expected<std::map<std::string, optimizer_config>> parse_rules(const std::string& text,
                                                                   const optimizer_config& base) {
  std::map<std::string, optimizer_config> out;
  size_t at = 0;
  while (at < text.size()) {
    auto end = text.find(',', at);
    auto entry = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    auto bad = [&](const std::string& why) {
      return make_error(errc::invalid_argument, "update rule '" + entry + "': " + why +
                                                    " (expected NAME=OPTIMIZER[:LR], e.g. fc1.weight=adam:0.001)");
    };
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      return bad("no NAME=");
    auto name = entry.substr(0, eq);
    auto rest = entry.substr(eq + 1);
    auto colon = rest.find(':');
    auto kind = parse_optimizer(rest.substr(0, colon));
    if (!kind)
      return make_error(errc::invalid_argument, "update rule '" + entry + "': unknown optimizer '" +
                                                    rest.substr(0, colon) + "' (sgd, momentum, adagrad or adam)");
    optimizer_config r = base;
    r.kind = *kind;
    r.custom = nullptr;
    if (colon != std::string::npos) {
      char* stop = nullptr;
      auto lr_text = rest.substr(colon + 1);
      float lr = std::strtof(lr_text.c_str(), &stop);
      if (lr_text.empty() || *stop != '\0' || !(lr > 0) || !std::isfinite(lr))
        return bad("learning rate '" + lr_text + "' is not a positive number");
      r.lr = lr;
    }
    if (!out.emplace(name, r).second)
      return bad("a second rule for " + name);
  }
  return out;
}

caf::expected<gradient_combine> parse_gradient_combine(const std::string& name) {
  if (name == "sum")
    return gradient_combine::sum;
  if (name == "mean")
    return gradient_combine::mean;
  return make_error(errc::invalid_argument,
                    "unknown way to combine the workers' gradients '" + name + "' (expected sum or mean)");
}

const char* to_string(gradient_combine c) {
  return c == gradient_combine::mean ? "mean" : "sum";
}

const char* to_string(optimizer_kind k) {
  switch (k) {
    case optimizer_kind::sgd: return "sgd";
    case optimizer_kind::momentum: return "momentum";
    case optimizer_kind::adagrad: return "adagrad";
    case optimizer_kind::adam: return "adam";
    case optimizer_kind::custom: return "custom";
  }
  return "unknown";
}

size_t slots_per_parameter(optimizer_kind k) {
  switch (k) {
    case optimizer_kind::sgd: return 0;
    case optimizer_kind::momentum: return 1;
    case optimizer_kind::adagrad: return 1;
    case optimizer_kind::adam: return 2;
    case optimizer_kind::custom: return 0;  // the rule's own: slots_of
  }
  return 0;
}

size_t slots_of(const optimizer_config& c) {
  if (c.kind == optimizer_kind::custom)
    return c.custom ? std::min<size_t>(c.custom->slots, 2) : 0;
  return slots_per_parameter(c.kind);
}

float initial_slot(const optimizer_config& c, size_t i) {
  if (c.kind == optimizer_kind::custom)
    return c.custom && i < 2 ? c.custom->initial[i] : 0.0f;
  return c.kind == optimizer_kind::adagrad && i == 0 ? c.initial_accumulator : 0.0f;
}

prepared_update prepare_update(const optimizer_config& c, uint64_t t) {
  prepared_update u;
  u.config = &c;
  u.t = t < 1 ? 1 : t;
  if (c.kind == optimizer_kind::adam) {
    // Bias corrections folded into the step size, as in Kingma & Ba, sec. 2.
    double tt = static_cast<double>(t < 1 ? 1 : t);
    float c1 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta1), tt));
    float c2 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta2), tt));
    u.adam_step = c.lr * std::sqrt(c2) / c1;
  }
  return u;
}

namespace {

// The rules over any gradient source: G(i) is the gradient of parameter i,
// which the rule takes times gradient_scale (x 1 is exact: a scale of 1
// changes no bit). One streaming pass over p (and the slots) each; the
// compiler vectorises both sources (a float array, or little-endian floats
// in a message's bytes read with memcpy).
template <class G>
void update(const prepared_update& u, float* __restrict__ p, float* __restrict__ s1,
            float* __restrict__ s2, G g_in, size_t n) {
  const optimizer_config& c = *u.config;
  const float lr = c.lr;
  const float scale = c.gradient_scale;
  auto g = [&g_in, scale](size_t i) { return g_in(i) * scale; };
  switch (c.kind) {
    case optimizer_kind::sgd:
      for (size_t i = 0; i < n; ++i)
        p[i] -= lr * g(i);
      return;
    case optimizer_kind::momentum:
      for (size_t i = 0; i < n; ++i) {
        s1[i] = c.momentum * s1[i] + g(i);
        p[i] -= lr * s1[i];
      }
      return;
    case optimizer_kind::adagrad:
      for (size_t i = 0; i < n; ++i) {
        float gi = g(i);
        s1[i] += gi * gi;
        p[i] -= lr * gi / (std::sqrt(s1[i]) + c.epsilon);
      }
      return;
    case optimizer_kind::adam: {
      const float step = u.adam_step;
      for (size_t i = 0; i < n; ++i) {
        float gi = g(i);
        s1[i] = c.beta1 * s1[i] + (1.0f - c.beta1) * gi;
        s2[i] = c.beta2 * s2[i] + (1.0f - c.beta2) * gi * gi;
        p[i] -= step * s1[i] / (std::sqrt(s2[i]) + c.epsilon);
      }
      return;
    }
    case optimizer_kind::custom: {
      // The rule reads its gradient from an array: blocks of it, scaled,
      // from whichever source (a shard never starts with a custom kind
      // and no rule: parameter_shard checks it).
      if (!c.custom || !c.custom->apply)
        return;
      constexpr size_t block = 256;
      float buf[block];
      for (size_t i = 0; i < n; i += block) {
        const size_t m = std::min(block, n - i);
        for (size_t j = 0; j < m; ++j) buf[j] = g(i + j);
        c.custom->apply(p + i, s1 ? s1 + i : nullptr, s2 ? s2 + i : nullptr, buf, m, u.t);
      }
      return;
    }
  }
}

}  // namespace

void apply_prepared(const prepared_update& u, float* p, float* s1, float* s2, const float* g,
                    size_t n) {
  update(u, p, s1, s2, [g](size_t i) { return g[i]; }, n);
}

void apply_update(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                  const float* g, size_t n) {
  update(prepare_update(c, t), p, s1, s2, [g](size_t i) { return g[i]; }, n);
}

void apply_update_bytes(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                        const unsigned char* g, size_t n) {
  update(prepare_update(c, t), p, s1, s2,
         [g](size_t i) {
           float v;
           std::memcpy(&v, g + 4 * i, 4);
           return v;
         },
         n);
}

namespace {

// Gradient i of the sum of `k` gradients in bytes, added in order:
// ((0 + g[0][i]) + g[1][i]) + ...
inline float sum_at(const unsigned char* const* g, size_t k, size_t i) {
  float sum = 0.0f;
  for (size_t j = 0; j < k; ++j) {
    float v;
    std::memcpy(&v, g[j] + 4 * i, 4);
    sum += v;
  }
  return sum;
}

// The same with the count known at compile time, so the loop unrolls.
template <size_t K>
void apply_sum_of(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                  const unsigned char* const* g, size_t n) {
  const unsigned char* src[K];
  for (size_t k = 0; k < K; ++k) src[k] = g[k];
  update(prepare_update(c, t), p, s1, s2, [&src](size_t i) { return sum_at(src, K, i); }, n);
}

}  // namespace

void apply_update_sum(const optimizer_config& c, uint64_t t, float* p, float* s1, float* s2,
                      const unsigned char* const* g, size_t k, size_t n) {
  switch (k) {
    case 2: return apply_sum_of<2>(c, t, p, s1, s2, g, n);
    case 3: return apply_sum_of<3>(c, t, p, s1, s2, g, n);
    case 4: return apply_sum_of<4>(c, t, p, s1, s2, g, n);
    default:
      return update(prepare_update(c, t), p, s1, s2, [g, k](size_t i) { return sum_at(g, k, i); }, n);
  }
}

}  // namespace keel
