#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "messages/errors.hpp"
#include "models/mnist_mlp.hpp"
#include "models/mnist_softmax.hpp"
#include "models/model_registry.hpp"
#include "models/plain_trainer.hpp"
#include "test_support.hpp"

using namespace keel;
using keel::test::temp_dir;

namespace {

std::shared_ptr<const mnist_dataset> synthetic(const temp_dir& tmp, uint32_t train = 64,
                                               uint32_t test = 32) {
  keel::test::write_synthetic_mnist(tmp.path(), train, test);
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE_MESSAGE(ds, keel::test::error_text(ds));
  return *ds;
}

// Central finite differences of the batch loss on a few keys of each tensor,
// compared with the analytic gradient.
void check_gradient(const model& m, uint64_t seed) {
  auto scratch = m.make_scratch();
  std::vector<float> w(m.layout().dense_size());
  m.initial_dense(seed, 0, w);
  // Nonzero biases, so that their gradients are exercised off the origin.
  for (const auto& t : m.layout().dense())
    if (t.shape.size() == 1)
      for (uint64_t i = 0; i < t.size; ++i)
        w[t.first_key + i] = 0.05f * static_cast<float>(static_cast<int>(i % 5) - 2);
  std::vector<uint64_t> batch{0, 5, 17, 33, 63};
  gradient_buffer g, probe;
  REQUIRE(!m.gradient(batch, {w, {}, {}}, *scratch, g));
  REQUIRE(g.dense.size() == w.size());
  auto loss_at = [&]() {
    REQUIRE(!m.gradient(batch, {w, {}, {}}, *scratch, probe));
    return probe.loss;
  };
  const float eps = 1e-2f;
  int checked = 0;
  for (const auto& t : m.layout().dense()) {
    // The largest-gradient key of the tensor, and two spread through it.
    uint64_t largest = t.first_key;
    for (uint64_t k = t.first_key; k < t.first_key + t.size; ++k)
      if (std::abs(g.dense[k]) > std::abs(g.dense[largest]))
        largest = k;
    for (uint64_t key : {largest, t.first_key + t.size / 3, t.first_key + t.size - 1}) {
      const float saved = w[key];
      w[key] = saved + eps;
      const double up = loss_at();
      w[key] = saved - eps;
      const double down = loss_at();
      w[key] = saved;
      const double numeric = (up - down) / (2.0 * eps);
      INFO(t.name << " key " << key << " analytic " << g.dense[key] << " numeric " << numeric);
      CHECK(std::abs(g.dense[key] - numeric) <= 2e-3 + 0.03 * std::abs(numeric));
      ++checked;
    }
  }
  CHECK(checked == 3 * static_cast<int>(m.layout().dense().size()));
}

}  // namespace

TEST_CASE("the softmax model's gradient matches finite differences of its loss") {
  temp_dir tmp;
  mnist_softmax m(synthetic(tmp));
  check_gradient(m, 3);
}

TEST_CASE("the MLP's gradient matches finite differences of its loss") {
  temp_dir tmp;
  mnist_mlp m(synthetic(tmp));
  check_gradient(m, 4);
}

TEST_CASE("the MLP lays out fc1.weight, fc1.bias, fc2.weight, fc2.bias end to end") {
  temp_dir tmp;
  mnist_mlp m(synthetic(tmp));
  const auto& l = m.layout();
  REQUIRE(l.dense().size() == 4);
  CHECK(l.dense_size() == 784 * 128 + 128 + 128 * 10 + 10);
  auto fc2 = l.find("fc2.weight");
  REQUIRE(fc2);
  CHECK(fc2->first_key == 784 * 128 + 128);
  CHECK(fc2->shape == std::vector<uint64_t>{128, 10});
  CHECK(l.sparse_key_count() == 0);
  CHECK(is(l.find("fc3.weight").error(), errc::not_found));
}

TEST_CASE("initial parameters are a function of (seed, key), so any range can be made alone") {
  temp_dir tmp;
  mnist_mlp m(synthetic(tmp));
  std::vector<float> all(m.layout().dense_size()), part(1000), other(1000);
  m.initial_dense(11, 0, all);
  m.initial_dense(11, 100000, part);
  for (size_t i = 0; i < part.size(); ++i) CHECK(part[i] == all[100000 + i]);
  m.initial_dense(12, 100000, other);
  CHECK(other != part);
}

TEST_CASE("a gradient computed twice into a reused buffer is identical") {
  temp_dir tmp;
  mnist_mlp m(synthetic(tmp));
  std::vector<float> w(m.layout().dense_size());
  m.initial_dense(1, 0, w);
  auto scratch = m.make_scratch();
  gradient_buffer a, b;
  std::vector<uint64_t> batch{1, 2, 3};
  REQUIRE(!m.gradient(batch, {w, {}, {}}, *scratch, a));
  b = a;
  REQUIRE(!m.gradient(std::vector<uint64_t>{9, 8}, {w, {}, {}}, *scratch, a));
  REQUIRE(!m.gradient(batch, {w, {}, {}}, *scratch, a));
  CHECK(a.dense == b.dense);
  CHECK(a.loss == b.loss);
}

TEST_CASE("a gradient request with bad sizes, indices or scratch is an invalid_argument error") {
  temp_dir tmp;
  mnist_softmax m(synthetic(tmp));
  std::vector<float> w(m.layout().dense_size());
  auto scratch = m.make_scratch();
  gradient_buffer g;
  std::vector<float> short_w(10);
  auto err = m.gradient(std::vector<uint64_t>{1}, {short_w, {}, {}}, *scratch, g);
  CHECK(is(err, errc::invalid_argument));
  CHECK(describe(err).find("dense") != std::string::npos);
  err = m.gradient(std::vector<uint64_t>{64}, {w, {}, {}}, *scratch, g);
  CHECK(is(err, errc::invalid_argument));
  CHECK(describe(err).find("batch[0] = 64") != std::string::npos);
  CHECK(is(m.gradient(std::vector<uint64_t>{}, {w, {}, {}}, *scratch, g), errc::invalid_argument));
  auto probe = make_model("probe", {});
  REQUIRE(probe);
  auto foreign = (*probe)->make_scratch();
  err = m.gradient(std::vector<uint64_t>{1}, {w, {}, {}}, *foreign, g);
  CHECK(is(err, errc::invalid_argument));
  CHECK(describe(err).find("model_scratch") != std::string::npos);
  auto eval = m.evaluate({short_w, {}}, *scratch);
  REQUIRE(!eval);
  CHECK(is(eval.error(), errc::invalid_argument));
}

TEST_CASE("an unknown model name is an error listing the known names") {
  auto m = make_model("resnet", {});
  REQUIRE(!m);
  CHECK(is(m.error(), errc::invalid_argument));
  const std::string text = describe(m.error());
  for (const auto& name : model_names()) CHECK(text.find(name) != std::string::npos);
  CHECK(model_names() ==
        std::vector<std::string>{"mnist-mlp", "mnist-softmax", "sparse-lr", "probe", "ctr-lr",
                                 "ctr-fm"});
}

TEST_CASE("evaluation counts a test example right when its largest logit is the label") {
  temp_dir tmp;
  mnist_softmax m(synthetic(tmp, 64, 40));
  // All weights zero, bias favouring class 3: predicts 3 for every image.
  std::vector<float> w(m.layout().dense_size(), 0.0f);
  w[784 * 10 + 3] = 5.0f;
  auto scratch = m.make_scratch();
  auto e = m.evaluate({w, {}}, *scratch);
  REQUIRE(e);
  uint64_t threes = 0;
  for (uint8_t label : m.data().test().labels) threes += label == 3 ? 1 : 0;
  CHECK(e->examples == 40);
  CHECK(*e->accuracy == doctest::Approx(static_cast<double>(threes) / 40.0));
  // log loss of a constant prediction: -log softmax = log(e^5 + 9) - (5 or 0).
  const double right = std::log(std::exp(5.0) + 9.0) - 5.0, wrong = std::log(std::exp(5.0) + 9.0);
  CHECK(*e->log_loss == doctest::Approx((threes * right + (40 - threes) * wrong) / 40.0));
}

TEST_CASE("a quality target bounds any figure a model reports by name") {
  evaluation e;
  e.examples = 10;
  e.metrics = {{"mse", 0.004}, {"auc", 0.8}};
  CHECK(e.metric("mse") == 0.004);
  CHECK(!e.metric("log_loss"));  // not reported: no log loss is made up
  CHECK(!e.metric("rmse"));
  quality_target t;
  t.bounds = {{"mse", std::nullopt, 0.01}, {"auc", 0.75, std::nullopt}};
  CHECK(meets(e, t));
  t.bounds[1].min = 0.9;  // auc 0.8 falls short
  CHECK(!meets(e, t));
  t.bounds = {{"rmse", std::nullopt, 1.0}};  // a bound on a figure never reported
  CHECK(!meets(e, t));
  t.bounds = {{"mse", std::nullopt, 0.01}};
  e.metrics[0].value = std::nan("");  // a diverged figure meets no bound
  CHECK(!meets(e, t));
  t.bounds.clear();
  t.max_log_loss = 1.0;  // a log-loss bound on a model that reports none
  CHECK(!meets(e, t));
  e.log_loss = 0.5;
  CHECK(meets(e, t));
  CHECK(e.metric("log_loss") == 0.5);
}

TEST_CASE("the plain trainer skips a step whose gradient is not finite") {
  temp_dir tmp;
  keel::test::write_synthetic_mnist(tmp.path(), 64, 8);
  auto ds = mnist_dataset::load(tmp.path(), mnist_variant::digits, {});
  REQUIRE(ds);
  mnist_softmax m(*ds);
  plain_trainer_config c;
  c.lr = 1e38f;  // the first step overflows the weights; later gradients are NaN
  c.batch_size = 8;
  c.epochs = 2;
  auto r = train_plain(m, c);
  REQUIRE(r);
  CHECK(r->steps == 16);
  CHECK(r->skipped_steps > 0);
}
