#pragma once
// mnist_classifier is the part the two MNIST models share: the data set, the
// batch loop with softmax cross-entropy over 10 classes, and evaluation
// (accuracy and mean log loss on the test split). A subclass supplies the
// network: a forward pass from one image's nonzero pixels to 10 logits, and
// the backward pass accumulating that example's gradient. Inputs are pixel /
// 255 in float32; blank pixels (about 80% of an MNIST image) are skipped, so
// the cost of the first layer is proportional to the ink. Immutable and
// thread-safe as the model contract says; all step buffers live in
// mnist_scratch.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/mnist_data.hpp"
#include "models/model.hpp"

namespace keel {

// Per-worker buffers of the MNIST models, sized once by make_scratch.
struct mnist_scratch : model_scratch {
  std::vector<uint32_t> ink_index;  // nonzero pixels of the current image (first ink_count)
  std::vector<float> ink_value;     // ... and their values in (0, 1]
  size_t ink_count = 0;
  std::vector<float> hidden;       // hidden activations (MLP only)
  std::vector<float> hidden_grad;  // d loss / d hidden (MLP only)
  std::vector<float> logits;       // 10 logits
  std::vector<float> logits_grad;  // d loss / d logits for the current example
};

// Softmax cross-entropy of one example: writes scale * (softmax(logits) -
// onehot(label)) into `grad` and returns -log softmax(logits)[label] in nats.
// `*correct` is set when the largest logit is the label's.
double softmax_cross_entropy(const float* logits, int classes, int label, float scale, float* grad,
                             bool* correct);

class mnist_classifier : public model {
 public:
  uint64_t num_train_examples() const override { return data_->train().count; }
  uint64_t num_test_examples() const override { return data_->test().count; }
  const parameter_layout& layout() const override { return layout_; }
  std::unique_ptr<model_scratch> make_scratch() const override;
  const mnist_dataset& data() const noexcept { return *data_; }

 protected:
  mnist_classifier(std::shared_ptr<const mnist_dataset> data, parameter_layout layout);

  // Computes s.logits from the image whose ink is in s.ink_index/ink_value.
  virtual void forward(span<const float> dense, mnist_scratch& s) const = 0;
  // Adds the current example's gradient (s.logits_grad already set) to `grad`.
  virtual void backward(span<const float> dense, mnist_scratch& s, float* grad) const = 0;

  caf::error do_gradient(span<const uint64_t> batch, const parameter_view& params,
                         model_scratch& scratch, gradient_buffer& out) const override;
  caf::expected<evaluation> do_evaluate(const full_parameters& params,
                                        model_scratch& scratch) const override;

 private:
  std::shared_ptr<const mnist_dataset> data_;
  parameter_layout layout_;
};

// Uniform(-bound, bound) initial value of dense key `key`, a pure function of (seed, key).
float uniform_initial_value(uint64_t seed, uint64_t key, float bound);

}  // namespace keel
