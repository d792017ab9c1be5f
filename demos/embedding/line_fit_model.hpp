#pragma once
// The line fit both embedding examples train: y = 3x - 1 plus noise, two
// parameters ("w" and "b"), an application's own keel::model. line_fit.cpp
// lets keel's workers train it; own_loop.cpp runs the training loop itself.
#include <cstdint>
#include <memory>

#include <keel/keel.hpp>

namespace line_fit_example {

// A pure function of the example index: any worker regenerates any example.
inline void example(uint64_t i, float& x, float& y) {
  uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 31;
  x = static_cast<float>(h % 2001) / 1000.0f - 1.0f;                    // [-1, 1]
  float noise = static_cast<float>((h >> 20) % 201) / 1000.0f - 0.1f;   // [-0.1, 0.1]
  y = 3.0f * x - 1.0f + noise;
}

class line_fit final : public keel::model {
 public:
  line_fit() { layout_.add_dense("w", {1}).add_dense("b", {1}); }
  std::string name() const override { return "line-fit"; }
  const keel::parameter_layout& layout() const override { return layout_; }
  uint64_t num_train_examples() const override { return 8192; }
  uint64_t num_test_examples() const override { return 1024; }
  keel::quality_target target() const override {
    keel::quality_target t;
    t.bounds.push_back({"mse", std::nullopt, 0.01});  // the noise alone gives ~0.0034
    t.basis = "the noise's own variance";
    return t;
  }
  void initial_dense(uint64_t, uint64_t, keel::span<float> out) const override {
    for (auto& v : out)
      v = 0.0f;
  }
  std::unique_ptr<keel::model_scratch> make_scratch() const override {
    return std::make_unique<keel::model_scratch>();
  }

 protected:
  caf::error do_gradient(keel::span<const uint64_t> batch, const keel::parameter_view& p,
                         keel::model_scratch&, keel::gradient_buffer& out) const override {
    float w = p.dense[0], b = p.dense[1], gw = 0, gb = 0;
    double loss = 0;
    for (auto i : batch) {
      float x, y;
      example(i, x, y);
      float err = w * x + b - y;
      gw += 2 * err * x;
      gb += 2 * err;
      loss += err * err;
    }
    auto n = static_cast<float>(batch.size());
    out.dense.assign({gw / n, gb / n});
    out.loss = loss / n;
    out.examples = static_cast<uint32_t>(batch.size());
    return {};
  }
  caf::expected<keel::evaluation> do_evaluate(const keel::full_parameters& p,
                                              keel::model_scratch&) const override {
    keel::evaluation e;
    e.examples = num_test_examples();
    double squares = 0;
    for (uint64_t i = 0; i < e.examples; ++i) {
      float x, y;
      example(num_train_examples() + i, x, y);
      float err = p.dense[0] * x + p.dense[1] - y;
      squares += err * err;
    }
    e.metrics.push_back({"mse", squares / static_cast<double>(e.examples)});
    return e;
  }

 private:
  keel::parameter_layout layout_;
};

}  // namespace line_fit_example
