#include <doctest/doctest.h>

#include <vector>

#include "messages/errors.hpp"
#include "models/model_registry.hpp"
#include "models/probe_model.hpp"

using namespace keel;

namespace {

// Applies `pushes` probe gradients with SGD as a shard would, returns the parameters.
struct simulated_shard {
  std::vector<float> dense, sparse;
};

simulated_shard push_n(const probe_model& m, uint64_t pushes, float lr) {
  simulated_shard s;
  s.dense.resize(m.layout().dense_size());
  m.initial_dense(9, 0, s.dense);
  s.sparse.assign(m.layout().sparse_key_count(), 0.0f);
  auto scratch = m.make_scratch();
  std::vector<uint64_t> batch, keys;
  std::vector<float> pulled;
  gradient_buffer g;
  for (uint64_t step = 0; step < pushes; ++step) {
    REQUIRE(!m.batch_indices({9, 0, step % 16, 0, 1, 64}, batch));
    REQUIRE(!m.sparse_keys(batch, *scratch, keys));
    pulled.clear();
    for (uint64_t k : keys) pulled.push_back(s.sparse[k]);
    REQUIRE(!m.gradient(batch, {s.dense, keys, pulled}, *scratch, g));
    for (size_t i = 0; i < g.dense.size(); ++i) s.dense[i] -= lr * g.dense[i];
    for (size_t i = 0; i < g.sparse_keys.size(); ++i)
      s.sparse[g.sparse_keys[i]] -= lr * g.sparse_values[i];
  }
  return s;
}

}  // namespace

TEST_CASE("every probe push adds exactly 1.0 to every parameter under SGD with its lr") {
  for (float lr : {1.0f, 0.25f, 4.0f}) {
    probe_config c;
    c.lr = lr;
    auto m = probe_model::make(c);
    REQUIRE(m);
    auto s = push_n(**m, 37, lr);
    CHECK(!(*m)->check({s.dense, s.sparse}, 37));
    CHECK(s.dense.size() == 1000);
    CHECK(s.sparse.size() == 8);
    CHECK(s.dense[999] == 37.0f);
    CHECK(s.sparse[7] == 37.0f);
  }
}

TEST_CASE("every probe batch touches all of its sparse keys with gradient -1/lr") {
  probe_config c;
  c.lr = 0.5f;
  auto m = probe_model::make(c);
  REQUIRE(m);
  auto scratch = (*m)->make_scratch();
  std::vector<uint64_t> batch{1, 2}, keys;
  REQUIRE(!(*m)->sparse_keys(batch, *scratch, keys));
  CHECK(keys == std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  std::vector<float> dense(1000, 3.0f), values(8, 3.0f);
  gradient_buffer g;
  REQUIRE(!(*m)->gradient(batch, {dense, keys, values}, *scratch, g));
  for (float v : g.dense) CHECK(v == -2.0f);
  CHECK(g.sparse_keys == keys);
  for (float v : g.sparse_values) CHECK(v == -2.0f);
}

TEST_CASE("a lost or duplicated probe push shows in check, naming the key") {
  auto m = probe_model::make({});
  REQUIRE(m);
  auto s = push_n(**m, 10, 1.0f);
  auto lost = (*m)->check({s.dense, s.sparse}, 11);
  CHECK(is(lost, errc::invalid_argument));
  CHECK(describe(lost).find("dense key 0 is 10") != std::string::npos);
  s.sparse[5] += 1.0f;  // one key got a push twice
  auto twice = (*m)->check({s.dense, s.sparse}, 10);
  CHECK(describe(twice).find("sparse key 5") != std::string::npos);
}

TEST_CASE("a probe lr that is not a power of two is refused") {
  probe_config c;
  c.lr = 0.3f;
  auto m = probe_model::make(c);
  REQUIRE(!m);
  CHECK(is(m.error(), errc::invalid_argument));
}

TEST_CASE("the probe is selectable by name with its options") {
  model_options o;
  o.probe.dense_keys = 10;
  o.probe.sparse_keys = 3;
  auto m = make_model("probe", o);
  REQUIRE(m);
  CHECK((*m)->name() == "probe");
  CHECK((*m)->layout().dense_size() == 10);
  CHECK((*m)->layout().sparse_key_count() == 3);
}
