#include "models/mnist_softmax.hpp"

#include <algorithm>

namespace keel {

namespace {

constexpr uint64_t inputs = mnist_dataset::image_pixels;
constexpr uint64_t classes = mnist_dataset::classes;
constexpr uint64_t bias_key = inputs * classes;

parameter_layout softmax_layout() {
  parameter_layout l;
  l.add_dense("softmax.weight", {inputs, classes});
  l.add_dense("softmax.bias", {classes});
  return l;
}

}  // namespace

mnist_softmax::mnist_softmax(std::shared_ptr<const mnist_dataset> data)
    : mnist_classifier(std::move(data), softmax_layout()) {}

quality_target mnist_softmax::target() const {
  if (data().variant() == mnist_variant::fashion)
    return {0.82, std::nullopt,
            "Fashion-MNIST softmax regression: plain single-thread SGD reaches 0.842", {}};
  return {0.92, std::nullopt, "MNIST softmax regression: plain single-thread SGD reaches 0.926", {}};
}

void mnist_softmax::initial_dense(uint64_t seed, uint64_t first_key, span<float> out) const {
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t key = first_key + i;
    out[i] = key < bias_key ? uniform_initial_value(seed, key, 0.01f) : 0.0f;
  }
}

void mnist_softmax::forward(span<const float> dense, mnist_scratch& s) const {
  float logits[classes];
  const float* w = dense.data();
  for (uint64_t k = 0; k < classes; ++k) logits[k] = w[bias_key + k];
  const size_t ink = s.ink_count;
  for (size_t n = 0; n < ink; ++n) {
    const float x = s.ink_value[n];
    const float* row = w + s.ink_index[n] * classes;
    for (uint64_t k = 0; k < classes; ++k) logits[k] += x * row[k];
  }
  std::copy(logits, logits + classes, s.logits.begin());
}

void mnist_softmax::backward(span<const float>, mnist_scratch& s, float* grad) const {
  const float* dl = s.logits_grad.data();
  for (uint64_t k = 0; k < classes; ++k) grad[bias_key + k] += dl[k];
  const size_t ink = s.ink_count;
  for (size_t n = 0; n < ink; ++n) {
    const float x = s.ink_value[n];
    float* row = grad + s.ink_index[n] * classes;
    for (uint64_t k = 0; k < classes; ++k) row[k] += x * dl[k];
  }
}

}  // namespace keel
