// The full-accuracy plain single-thread baselines (label `slow`; run with
// `ctest -L slow`). Each trains on the whole data set and checks the
// model's own quality_target; the figures are printed for bench/ and the
// notes. Hyperparameters here are the reference ones.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "messages/errors.hpp"
#include "models/model_registry.hpp"
#include "models/plain_trainer.hpp"
#include "models/sparse_lr.hpp"
#include "test_support.hpp"

using namespace keel;

namespace {

void run_baseline(const std::string& name, const model_options& o, const plain_trainer_config& c) {
  auto m = make_model(name, o);
  REQUIRE_MESSAGE(m, keel::test::error_text(m));
  auto r = train_plain(**m, c, [&](const plain_epoch& e) {
    std::printf("%s epoch %llu: train loss %.4f, %.1f s\n", name.c_str(),
                static_cast<unsigned long long>(e.epoch), e.mean_train_loss, e.train_seconds);
    std::fflush(stdout);
  });
  REQUIRE_MESSAGE(r, keel::test::error_text(r));
  const auto target = (*m)->target();
  std::printf(
      "BASELINE %s: lr %g batch %u epochs %llu | test log loss %.4f accuracy %.4f | "
      "train %.1f s, %.0f examples/s | target: %s\n",
      name.c_str(), static_cast<double>(c.lr), c.batch_size,
      static_cast<unsigned long long>(c.epochs), *r->final_test.log_loss,
      r->final_test.accuracy.value_or(-1.0), r->train_seconds, r->examples_per_second,
      target.basis.c_str());
  CHECK(r->skipped_steps == 0);
  CHECK(meets(r->final_test, target));
}

model_options mnist_options() {
  model_options o;
  o.data_dir = KEEL_TEST_DATA_DIR;
  return o;
}

}  // namespace

TEST_CASE("plain single-thread SGD trains the MNIST MLP to its target accuracy") {
  plain_trainer_config c;
  c.lr = 0.1f;
  c.batch_size = 32;
  c.epochs = 8;
  run_baseline("mnist-mlp", mnist_options(), c);
}

TEST_CASE("plain single-thread SGD trains MNIST softmax regression to its target accuracy") {
  plain_trainer_config c;
  c.lr = 0.05f;
  c.batch_size = 32;
  c.epochs = 10;
  run_baseline("mnist-softmax", mnist_options(), c);
}

TEST_CASE("plain single-thread SGD brings sparse-lr within 5% of the ground truth's log loss") {
  model_options o;  // the default sparse_lr_config: 2^20 keys, 500k training rows
  plain_trainer_config c;
  c.lr = 0.2f;
  c.batch_size = 64;
  c.epochs = 2;
  run_baseline("sparse-lr", o, c);
}
