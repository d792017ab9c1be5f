#include "models/mnist_mlp.hpp"

#include <algorithm>
#include <cmath>

namespace keel {

namespace {

constexpr uint64_t inputs = mnist_dataset::image_pixels;
constexpr uint64_t hidden = mnist_mlp::hidden_units;
constexpr uint64_t classes = mnist_dataset::classes;
// Key offsets of the four tensors, in layout order.
constexpr uint64_t w1_key = 0;
constexpr uint64_t b1_key = w1_key + inputs * hidden;
constexpr uint64_t w2_key = b1_key + hidden;
constexpr uint64_t b2_key = w2_key + hidden * classes;
constexpr uint64_t total_keys = b2_key + classes;

parameter_layout mlp_layout() {
  parameter_layout l;
  l.add_dense("fc1.weight", {inputs, hidden});
  l.add_dense("fc1.bias", {hidden});
  l.add_dense("fc2.weight", {hidden, classes});
  l.add_dense("fc2.bias", {classes});
  return l;
}

}  // namespace

mnist_mlp::mnist_mlp(std::shared_ptr<const mnist_dataset> data)
    : mnist_classifier(std::move(data), mlp_layout()) {}

quality_target mnist_mlp::target() const {
  if (data().variant() == mnist_variant::fashion)
    return {0.86, std::nullopt,
            "Fashion-MNIST MLP 784-128-10: plain single-thread SGD reaches 0.873", {}};
  return {0.97, std::nullopt, "MNIST MLP 784-128-10: plain single-thread SGD reaches 0.979", {}};
}

void mnist_mlp::initial_dense(uint64_t seed, uint64_t first_key, span<float> out) const {
  const float w1_bound = std::sqrt(6.0f / inputs);
  const float w2_bound = std::sqrt(6.0f / (hidden + classes));
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t key = first_key + i;
    if (key < b1_key)
      out[i] = uniform_initial_value(seed, key, w1_bound);
    else if (key >= w2_key && key < b2_key)
      out[i] = uniform_initial_value(seed, key, w2_bound);
    else
      out[i] = 0.0f;
  }
}

std::unique_ptr<model_scratch> mnist_mlp::make_scratch() const {
  auto s = mnist_classifier::make_scratch();
  auto& m = static_cast<mnist_scratch&>(*s);
  m.hidden.resize(hidden);
  m.hidden_grad.resize(hidden);
  return s;
}

// The inner loops run over a fixed 128 (or 10) contiguous floats of local
// arrays, which GCC vectorises at -O2/-O3 with no aliasing checks. The first
// layer takes four ink pixels a pass, so the hidden vector is loaded and
// stored once per four rows of fc1.weight rather than once per row.
void mnist_mlp::forward(span<const float> dense, mnist_scratch& s) const {
  const float* w = dense.data();
  alignas(64) float h[hidden];
  for (uint64_t j = 0; j < hidden; ++j) h[j] = w[b1_key + j];
  const size_t ink = s.ink_count;
  const uint32_t* index = s.ink_index.data();
  const float* value = s.ink_value.data();
  size_t n = 0;
  for (; n + 4 <= ink; n += 4) {
    const float x0 = value[n], x1 = value[n + 1], x2 = value[n + 2], x3 = value[n + 3];
    const float* r0 = w + w1_key + index[n] * hidden;
    const float* r1 = w + w1_key + index[n + 1] * hidden;
    const float* r2 = w + w1_key + index[n + 2] * hidden;
    const float* r3 = w + w1_key + index[n + 3] * hidden;
    for (uint64_t j = 0; j < hidden; ++j)
      h[j] += (x0 * r0[j] + x1 * r1[j]) + (x2 * r2[j] + x3 * r3[j]);
  }
  for (; n < ink; ++n) {
    const float x = value[n];
    const float* row = w + w1_key + index[n] * hidden;
    for (uint64_t j = 0; j < hidden; ++j) h[j] += x * row[j];
  }
  for (uint64_t j = 0; j < hidden; ++j) h[j] = h[j] > 0.0f ? h[j] : 0.0f;
  float logits[classes];
  for (uint64_t k = 0; k < classes; ++k) logits[k] = w[b2_key + k];
  for (uint64_t j = 0; j < hidden; ++j) {
    if (h[j] == 0.0f)
      continue;
    const float* row = w + w2_key + j * classes;
    for (uint64_t k = 0; k < classes; ++k) logits[k] += h[j] * row[k];
  }
  std::copy(h, h + hidden, s.hidden.begin());
  std::copy(logits, logits + classes, s.logits.begin());
}

void mnist_mlp::backward(span<const float> dense, mnist_scratch& s, float* grad) const {
  const float* w = dense.data();
  const float* dl = s.logits_grad.data();
  const float* h = s.hidden.data();
  float* dh = s.hidden_grad.data();
  for (uint64_t k = 0; k < classes; ++k) grad[b2_key + k] += dl[k];
  for (uint64_t j = 0; j < hidden; ++j) {
    // relu'(z) is 0 where the activation was clamped: no gradient flows there.
    if (h[j] == 0.0f) {
      dh[j] = 0.0f;
      continue;
    }
    const float* row = w + w2_key + j * classes;
    float* grow = grad + w2_key + j * classes;
    float back = 0.0f;
    for (uint64_t k = 0; k < classes; ++k) {
      grow[k] += h[j] * dl[k];
      back += row[k] * dl[k];
    }
    dh[j] = back;
  }
  alignas(64) float dh_local[hidden];
  for (uint64_t j = 0; j < hidden; ++j) {
    grad[b1_key + j] += dh[j];
    dh_local[j] = dh[j];
  }
  const size_t ink = s.ink_count;
  const uint32_t* index = s.ink_index.data();
  const float* value = s.ink_value.data();
  for (size_t n = 0; n < ink; ++n) {
    const float x = value[n];
    float* row = grad + w1_key + index[n] * hidden;
    for (uint64_t j = 0; j < hidden; ++j) row[j] += x * dh_local[j];
  }
}

static_assert(total_keys == 784 * 128 + 128 + 128 * 10 + 10, "MLP key layout");

}  // namespace keel
