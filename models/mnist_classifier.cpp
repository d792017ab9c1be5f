#include "models/mnist_classifier.hpp"

#include <algorithm>
#include <cmath>

#include "models/counter_rng.hpp"

namespace keel {

namespace {

constexpr uint64_t init_stream = 0x696e697469616c73ULL;  // "initials"
constexpr float inv_255 = 1.0f / 255.0f;

// Compacts the nonzero pixels without a branch per pixel: every pixel is
// written at the next free slot, which advances only past ink. (Ink and blank
// alternate unpredictably, so a branch would mispredict often.)
void gather_ink(const uint8_t* image, mnist_scratch& s) {
  uint32_t* index = s.ink_index.data();
  float* value = s.ink_value.data();
  size_t count = 0;
  for (uint32_t i = 0; i < mnist_dataset::image_pixels; ++i) {
    index[count] = i;
    value[count] = static_cast<float>(image[i]) * inv_255;
    count += image[i] != 0 ? 1 : 0;
  }
  s.ink_count = count;
}

}  // namespace

double softmax_cross_entropy(const float* logits, int classes, int label, float scale, float* grad,
                             bool* correct) {
  int best = 0;
  float top = logits[0];
  for (int k = 1; k < classes; ++k)
    if (logits[k] > top) {
      top = logits[k];
      best = k;
    }
  // Subtracting the largest logit keeps exp() in range; the sum is in double
  // so the log loss of a confident model is not rounded to zero.
  double sum = 0;
  for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(logits[k] - top));
  const double log_sum = std::log(sum);
  for (int k = 0; k < classes; ++k) {
    const double p = std::exp(static_cast<double>(logits[k] - top) - log_sum);
    grad[k] = static_cast<float>(scale * (p - (k == label ? 1.0 : 0.0)));
  }
  *correct = best == label;
  return log_sum - static_cast<double>(logits[label] - top);
}

float uniform_initial_value(uint64_t seed, uint64_t key, float bound) {
  const double u = unit_double(counter_hash(seed, init_stream, key));
  return static_cast<float>((2.0 * u - 1.0) * bound);
}

mnist_classifier::mnist_classifier(std::shared_ptr<const mnist_dataset> data,
                                   parameter_layout layout)
    : data_(std::move(data)), layout_(std::move(layout)) {}

std::unique_ptr<model_scratch> mnist_classifier::make_scratch() const {
  auto s = std::make_unique<mnist_scratch>();
  s->ink_index.resize(mnist_dataset::image_pixels);
  s->ink_value.resize(mnist_dataset::image_pixels);
  s->logits.resize(mnist_dataset::classes);
  s->logits_grad.resize(mnist_dataset::classes);
  return s;
}

caf::error mnist_classifier::do_gradient(span<const uint64_t> batch, const parameter_view& params,
                                         model_scratch& scratch, gradient_buffer& out) const {
  auto s = own_scratch<mnist_scratch>(scratch);
  if (!s)
    return std::move(s.error());
  out.dense.assign(layout_.dense_size(), 0.0f);
  out.sparse_keys.clear();
  out.sparse_values.clear();
  const auto& train = data_->train();
  const float scale = 1.0f / static_cast<float>(batch.size());
  double loss = 0;
  bool correct = false;
  for (uint64_t index : batch) {
    gather_ink(train.image(index), **s);
    forward(params.dense, **s);
    loss += softmax_cross_entropy((*s)->logits.data(), mnist_dataset::classes, train.labels[index],
                                  scale, (*s)->logits_grad.data(), &correct);
    backward(params.dense, **s, out.dense.data());
  }
  out.loss = loss / static_cast<double>(batch.size());
  out.examples = static_cast<uint32_t>(batch.size());
  return {};
}

caf::expected<evaluation> mnist_classifier::do_evaluate(const full_parameters& params,
                                                        model_scratch& scratch) const {
  auto s = own_scratch<mnist_scratch>(scratch);
  if (!s)
    return std::move(s.error());
  const auto& test = data_->test();
  double loss = 0;
  uint64_t right = 0;
  bool correct = false;
  for (uint64_t i = 0; i < test.count; ++i) {
    gather_ink(test.image(i), **s);
    forward(params.dense, **s);
    loss += softmax_cross_entropy((*s)->logits.data(), mnist_dataset::classes, test.labels[i], 1.0f,
                                  (*s)->logits_grad.data(), &correct);
    right += correct ? 1 : 0;
  }
  evaluation e;
  e.examples = test.count;
  e.log_loss = test.count ? loss / static_cast<double>(test.count) : 0.0;
  e.accuracy = test.count ? static_cast<double>(right) / static_cast<double>(test.count) : 0.0;
  return e;
}

}  // namespace keel
