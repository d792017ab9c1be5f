// Tests on the real MNIST files. CTest runs scripts/fetch-mnist.sh first (the
// keel_mnist_data fixture); KEEL_TEST_DATA_DIR is the cache folder it fills.
#include <doctest/doctest.h>

#include "messages/errors.hpp"
#include "models/model_registry.hpp"
#include "models/plain_trainer.hpp"
#include "test_support.hpp"

using namespace keel;

namespace {

model_options subset(uint64_t train, uint64_t test) {
  model_options o;
  o.data_dir = KEEL_TEST_DATA_DIR;
  o.mnist_limits = {train, test};
  return o;
}

}  // namespace

TEST_CASE("the fetched data set loads whole: 60000 training and 10000 test images") {
  auto ds = mnist_dataset::load_cached(KEEL_TEST_DATA_DIR, {});
  REQUIRE_MESSAGE(ds, keel::test::error_text(ds));
  MESSAGE("data set: " << to_string((*ds)->variant()));
  CHECK((*ds)->train().count == 60000);
  CHECK((*ds)->test().count == 10000);
  // Every class is present in the test split.
  int per_class[10] = {};
  for (uint8_t y : (*ds)->test().labels) ++per_class[y];
  for (int k = 0; k < 10; ++k) CHECK(per_class[k] > 800);
}

TEST_CASE("plain SGD reduces the MLP's loss on a 3000-image MNIST subset") {
  auto m = make_model("mnist-mlp", subset(3000, 1000));
  REQUIRE_MESSAGE(m, keel::test::error_text(m));
  auto scratch = (*m)->make_scratch();
  std::vector<float> w((*m)->layout().dense_size());
  (*m)->initial_dense(1, 0, w);
  auto before = (*m)->evaluate({w, {}}, *scratch);
  REQUIRE(before);
  plain_trainer_config c;
  c.lr = 0.1f;
  c.batch_size = 32;
  c.epochs = 2;
  auto r = train_plain(**m, c);
  REQUIRE_MESSAGE(r, keel::test::error_text(r));
  MESSAGE("MLP subset: loss " << *before->log_loss << " -> " << *r->final_test.log_loss
                              << ", accuracy " << *r->final_test.accuracy);
  CHECK(*r->final_test.log_loss < 0.5 * *before->log_loss);
  CHECK(*r->final_test.accuracy > 0.8);
  CHECK(r->epochs.size() == 2);
  CHECK(r->epochs[1].mean_train_loss < r->epochs[0].mean_train_loss);
  CHECK(r->skipped_steps == 0);
}

TEST_CASE("plain SGD reduces the softmax model's loss on a 3000-image MNIST subset") {
  auto m = make_model("mnist-softmax", subset(3000, 1000));
  REQUIRE_MESSAGE(m, keel::test::error_text(m));
  plain_trainer_config c;
  c.lr = 0.1f;
  c.batch_size = 32;
  c.epochs = 2;
  auto r = train_plain(**m, c);
  REQUIRE_MESSAGE(r, keel::test::error_text(r));
  MESSAGE("softmax subset: loss " << *r->final_test.log_loss << ", accuracy "
                                  << *r->final_test.accuracy);
  CHECK(*r->final_test.log_loss < 0.6);  // log 10 = 2.30 untrained
  CHECK(*r->final_test.accuracy > 0.8);
}
