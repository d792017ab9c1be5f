#pragma once
// mnist_mlp is the 784-128-10 multilayer perceptron on MNIST: h = relu(x W1 +
// b1), logits = h W2 + b2, softmax cross-entropy. Its dense tensors, in key
// order: "fc1.weight" [784, 128], "fc1.bias" [128], "fc2.weight" [128, 10],
// "fc2.bias" [10] (weights input-major: row i holds input i's outgoing
// weights, so a pixel's update is one contiguous run of 128 floats).
// Registry name "mnist-mlp". Immutable and thread-safe per the model contract.

#include <memory>

#include "models/mnist_classifier.hpp"

namespace keel {

class mnist_mlp final : public mnist_classifier {
 public:
  static constexpr uint64_t hidden_units = 128;

  explicit mnist_mlp(std::shared_ptr<const mnist_dataset> data);

  std::string name() const override { return "mnist-mlp"; }
  // MNIST: test accuracy >= 0.97; Fashion-MNIST: >= 0.86.
  quality_target target() const override;
  // He-uniform fc1 weights (bound sqrt(6/784)), Glorot-uniform fc2 weights
  // (bound sqrt(6/138)), zero biases; each a pure function of (seed, key).
  void initial_dense(uint64_t seed, uint64_t first_key, span<float> out) const override;
  std::unique_ptr<model_scratch> make_scratch() const override;

 protected:
  void forward(span<const float> dense, mnist_scratch& s) const override;
  void backward(span<const float> dense, mnist_scratch& s, float* grad) const override;
};

}  // namespace keel
