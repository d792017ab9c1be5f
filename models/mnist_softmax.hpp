#pragma once
// mnist_softmax is multinomial logistic regression on MNIST: logits = x W + b
// with W "softmax.weight" [784, 10] (input-major: row i holds pixel i's
// weights to the 10 classes) and b "softmax.bias" [10], trained with softmax
// cross-entropy. Registry name "mnist-softmax". Immutable and thread-safe per
// the model contract; it shares its data set with other models.

#include <memory>

#include "models/mnist_classifier.hpp"

namespace keel {

class mnist_softmax final : public mnist_classifier {
 public:
  explicit mnist_softmax(std::shared_ptr<const mnist_dataset> data);

  std::string name() const override { return "mnist-softmax"; }
  // MNIST: test accuracy >= 0.92; Fashion-MNIST: >= 0.82 (see the header of model_registry.hpp).
  quality_target target() const override;
  // Weights uniform in +-0.01 from (seed, key); bias zero.
  void initial_dense(uint64_t seed, uint64_t first_key, span<float> out) const override;

 protected:
  void forward(span<const float> dense, mnist_scratch& s) const override;
  void backward(span<const float> dense, mnist_scratch& s, float* grad) const override;
};

}  // namespace keel
