#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
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

TEST_CASE("the probe's check holds each key to its own shard's count when shards acknowledged different counts") {
  auto m = probe_model::make({});
  REQUIRE(m);
  auto s = push_n(**m, 10, 1.0f);
  const size_t dense = s.dense.size();
  // A worker that left mid-step: its last push reached the second half of
  // the keys (one shard) and not the first.
  for (size_t k = dense / 2; k < dense; ++k) s.dense[k] += 1.0f;
  for (auto& v : s.sparse) v += 1.0f;
  auto by_shard = [&](uint64_t k) -> uint64_t { return k < dense / 2 ? 10 : 11; };
  CHECK(!(*m)->check({s.dense, s.sparse}, by_shard));
  CHECK(describe((*m)->check({s.dense, s.sparse}, 10)).find("dense key " + std::to_string(dense / 2) + " is 11") !=
        std::string::npos);
  s.dense[3] += 1.0f;  // a push applied twice at the first shard
  CHECK(describe((*m)->check({s.dense, s.sparse}, by_shard)).find("dense key 3 is 11") != std::string::npos);
  s.dense[3] -= 1.0f;
  s.sparse[2] -= 1.0f;  // one lost at the second
  CHECK(describe((*m)->check({s.dense, s.sparse}, by_shard)).find("sparse key 2 is 10") != std::string::npos);
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

namespace {

// Rows of the probe's table as a shard holds them: created at initial_rows
// on first push, then w -= lr * g per push.
using probe_rows = std::map<uint64_t, std::vector<float>>;

void push_rows(const probe_model& m, uint64_t seed, const table_key_lists& keys,
               model_scratch& scratch, span<const uint64_t> batch, float lr, probe_rows& rows) {
  const uint32_t d = probe_model::table_dim;
  std::vector<float> pulled(keys[0].size() * d);
  for (size_t i = 0; i < keys[0].size(); ++i) {
    auto [it, fresh] = rows.try_emplace(keys[0][i], std::vector<float>(d));
    if (fresh)
      REQUIRE(!m.initial_rows(seed, 0, {&keys[0][i], 1}, it->second));
    std::copy(it->second.begin(), it->second.end(), pulled.begin() + i * d);
  }
  std::vector<float> dense(m.layout().dense_size());
  std::vector<uint64_t> sparse_keys(m.layout().sparse_key_count());
  for (uint64_t k = 0; k < sparse_keys.size(); ++k) sparse_keys[k] = k;
  std::vector<float> sparse(sparse_keys.size());
  table_rows view_rows{keys[0], pulled};
  gradient_buffer g;
  REQUIRE(!m.gradient(batch, {dense, sparse_keys, sparse, {&view_rows, 1}}, scratch, g));
  REQUIRE(g.tables.size() == 1);
  REQUIRE(g.tables[0].keys == keys[0]);
  REQUIRE(g.tables[0].rows.size() == keys[0].size() * d);
  for (size_t i = 0; i < keys[0].size(); ++i)
    for (uint32_t j = 0; j < d; ++j) rows[keys[0][i]][j] -= lr * g.tables[0].rows[i * d + j];
}

}  // namespace

TEST_CASE("each probe push adds exactly 1 to every element of every row it touches") {
  probe_config c;
  c.table_keys = 4;
  c.table_pool = 64;
  c.lr = 0.5f;
  auto m = probe_model::make(c);
  REQUIRE(m);
  REQUIRE((*m)->layout().tables().size() == 1);
  CHECK((*m)->layout().tables()[0].dim == probe_model::table_dim);
  auto scratch = (*m)->make_scratch();
  const uint64_t seed = 5, steps = 40;  // 2.5 epochs of 16 batches of 64
  probe_rows rows;
  std::vector<uint64_t> batch;
  table_key_lists keys;
  bool wide = false;
  for (uint64_t step = 0; step < steps; ++step) {
    REQUIRE(!(*m)->batch_indices({seed, step / 16, step % 16, 0, 1, 64}, batch));
    REQUIRE(!(*m)->table_keys(batch, *scratch, keys));
    REQUIRE(keys.size() == 1);
    CHECK(!keys[0].empty());
    CHECK(keys[0].size() <= c.table_keys);
    CHECK(std::is_sorted(keys[0].begin(), keys[0].end()));
    CHECK(std::adjacent_find(keys[0].begin(), keys[0].end()) == keys[0].end());
    for (uint64_t k : keys[0]) wide = wide || k > (uint64_t{1} << 48);
    push_rows(**m, seed, keys, *scratch, batch, c.lr, rows);
  }
  CHECK(wide);  // keys spread over the 64-bit space
  auto touches = (*m)->table_touches(seed, 1, 64, steps);
  REQUIRE(touches);
  REQUIRE(touches->size() == rows.size());
  uint64_t repeated = 0;
  std::vector<float> initial(probe_model::table_dim);
  for (auto& [key, n] : *touches) {
    REQUIRE(rows.count(key) == 1);
    repeated += n > 1;
    REQUIRE(!(*m)->initial_rows(seed, 0, {&key, 1}, initial));
    for (uint32_t j = 0; j < probe_model::table_dim; ++j) {
      CHECK(initial[j] == std::floor(initial[j]));
      CHECK(rows[key][j] == initial[j] + static_cast<float>(n));
    }
  }
  CHECK(repeated > 0);  // rows recur across batches
  CHECK(rows.size() <= c.table_pool);
}

TEST_CASE("the probe has no table by default, and a table needs a pool") {
  auto plain = probe_model::make({});
  REQUIRE(plain);
  CHECK((*plain)->layout().tables().empty());
  CHECK(!(*plain)->has_table());
  auto touches = (*plain)->table_touches(1, 2, 16, 10);
  REQUIRE(touches);
  CHECK(touches->empty());
  probe_config c;
  c.table_keys = 4;
  c.table_pool = 0;
  auto m = probe_model::make(c);
  REQUIRE(!m);
  CHECK(describe(m.error()).find("table_pool") != std::string::npos);
  c.table_pool = 8;
  auto ok = probe_model::make(c);
  REQUIRE(ok);
  auto bad = (*ok)->table_touches(1, 4, 512, 10);  // a worker's share is under one batch
  CHECK(!bad);
}
