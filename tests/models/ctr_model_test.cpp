#include "models/ctr_model.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "messages/errors.hpp"
#include "models/counter_rng.hpp"
#include "models/model_registry.hpp"
#include "models/plain_trainer.hpp"
#include "test_support.hpp"

using namespace keel;

namespace {

ctr_config tiny_config() {
  ctr_config c;
  c.vocabulary = 1000;
  c.train_examples = 2000;
  c.test_examples = 1000;
  c.fm_factors = 4;
  return c;
}

std::shared_ptr<const ctr_model> make(const ctr_config& c, uint32_t factors) {
  auto m = ctr_model::make(c, factors);
  REQUIRE_MESSAGE(m, keel::test::error_text(m));
  return *m;
}

// The rows a worker would pull for a batch: every key the model names,
// initial rows perturbed by a hash so that no gradient term vanishes.
struct pulled_rows {
  table_key_lists keys;
  std::vector<std::vector<float>> rows;
  std::vector<table_rows> views;

  void fill(const model& m, uint64_t seed, float noise) {
    const auto& specs = m.layout().tables();
    rows.resize(specs.size());
    views.resize(specs.size());
    for (uint32_t t = 0; t < specs.size(); ++t) {
      rows[t].resize(keys[t].size() * specs[t].dim);
      REQUIRE(!m.initial_rows(seed, t, keys[t], rows[t]));
      for (size_t i = 0; i < rows[t].size(); ++i)
        rows[t][i] += noise * static_cast<float>(unit_double(counter_hash(seed, t, i)) - 0.5);
      views[t] = table_rows{keys[t], rows[t]};
    }
  }
};

// Central differences of the batch's mean loss against the analytic
// gradient, for every dense key and some elements of some rows.
void check_gradient(const ctr_model& m) {
  auto scratch = m.make_scratch();
  std::vector<uint64_t> batch{3, 17, 256, 999, 1500, 1999};
  pulled_rows p;
  REQUIRE(!m.table_keys(batch, *scratch, p.keys));
  p.fill(m, 7, 0.4f);
  std::vector<float> dense(m.layout().dense_size());
  for (size_t i = 0; i < dense.size(); ++i)
    dense[i] = 0.2f * static_cast<float>(unit_double(counter_hash(8, i)) - 0.5);
  gradient_buffer g, probe;
  auto view = [&] { return parameter_view{dense, {}, {}, p.views}; };
  REQUIRE(!m.gradient(batch, view(), *scratch, g));
  auto loss = [&] {
    REQUIRE(!m.gradient(batch, view(), *scratch, probe));
    return probe.loss;
  };
  const float eps = 1e-2f;
  auto numeric = [&](float& w) {
    const float saved = w;
    w = saved + eps;
    const double up = loss();
    w = saved - eps;
    const double down = loss();
    w = saved;
    return (up - down) / (2 * static_cast<double>(eps));
  };
  int checked = 0;
  for (size_t i = 0; i < dense.size(); ++i) {
    CHECK(numeric(dense[i]) == doctest::Approx(g.dense[i]).epsilon(2e-3).scale(1e-3));
    ++checked;
  }
  const uint32_t d = m.row_dim();
  for (uint32_t t = 0; t < m.layout().tables().size(); t += 5) {
    REQUIRE(g.tables[t].keys == p.keys[t]);
    REQUIRE(g.tables[t].rows.size() == p.rows[t].size());
    for (size_t i = 0; i < p.rows[t].size(); i += d + 1) {
      CAPTURE(t);
      CAPTURE(i);
      CHECK(numeric(p.rows[t][i]) == doctest::Approx(g.tables[t].rows[i]).epsilon(2e-3).scale(1e-3));
      ++checked;
    }
  }
  CHECK(checked > 25);
}

}  // namespace

TEST_CASE("ctr-lr's gradient matches finite differences of its loss") {
  check_gradient(*make(tiny_config(), 0));
}

TEST_CASE("ctr-fm's gradient matches finite differences of its loss, factors included") {
  check_gradient(*make(tiny_config(), 4));
}

TEST_CASE("a CTR model names each table's keys sorted and distinct, and rows a view lacks") {
  auto m = make(tiny_config(), 4);
  auto scratch = m->make_scratch();
  REQUIRE(m->layout().tables().size() == 26);
  CHECK(m->layout().tables()[0].name == "ctr_fm.c1");
  CHECK(m->layout().tables()[0].dim == 5);
  std::vector<uint64_t> batch{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  pulled_rows p;
  REQUIRE(!m->table_keys(batch, *scratch, p.keys));
  REQUIRE(p.keys.size() == 26);
  for (auto& keys : p.keys) {
    CHECK(!keys.empty());
    CHECK(keys.size() <= batch.size());
    CHECK(std::adjacent_find(keys.begin(), keys.end(), std::greater_equal<uint64_t>()) ==
          keys.end());
  }
  p.fill(*m, 1, 0.1f);
  std::vector<float> dense(m->layout().dense_size(), 0.0f);
  gradient_buffer exact, superset;
  REQUIRE(!m->gradient(batch, {dense, {}, {}, p.views}, *scratch, exact));
  // A view with an extra row in table 3 gives the same gradient, zero on the extra row.
  pulled_rows more = p;
  const uint64_t extra = p.keys[3].back() + 1;
  more.keys[3].push_back(extra);
  more.fill(*m, 1, 0.1f);
  REQUIRE(!m->gradient(batch, {dense, {}, {}, more.views}, *scratch, superset));
  CHECK(superset.loss == exact.loss);
  CHECK(superset.tables[3].keys.back() == extra);
  CHECK(std::all_of(superset.tables[3].rows.end() - 5, superset.tables[3].rows.end(),
                    [](float v) { return v == 0.0f; }));
  // A view without one of the batch's rows is refused, naming the table.
  pulled_rows fewer = p;
  fewer.keys[7].erase(fewer.keys[7].begin());
  fewer.fill(*m, 1, 0.1f);
  auto err = m->gradient(batch, {dense, {}, {}, fewer.views}, *scratch, exact);
  CHECK(is(err, errc::invalid_argument));
  CHECK(describe(err).find("ctr_fm.c8") != std::string::npos);
  // Rows of the wrong width, keys out of order and a missing table are refused.
  std::vector<table_rows> bad = p.views;
  bad[2].rows = span<const float>(p.rows[2].data(), p.rows[2].size() - 1);
  CHECK(is(m->gradient(batch, {dense, {}, {}, bad}, *scratch, exact), errc::invalid_argument));
  std::vector<uint64_t> reversed(p.keys[0].rbegin(), p.keys[0].rend());
  bad = p.views;
  bad[0].keys = reversed;
  if (reversed.size() > 1)
    CHECK(is(m->gradient(batch, {dense, {}, {}, bad}, *scratch, exact), errc::invalid_argument));
  bad.pop_back();
  CHECK(is(m->gradient(batch, {dense, {}, {}, bad}, *scratch, exact), errc::invalid_argument));
}

TEST_CASE("a row's initial value is a pure function of (seed, table, key)") {
  auto m = make(tiny_config(), 4);
  std::vector<uint64_t> keys{5, 1ull << 60, 77}, one{77};
  std::vector<float> rows(15), again(5), other_table(5), other_seed(5);
  REQUIRE(!m->initial_rows(3, 2, keys, rows));
  REQUIRE(!m->initial_rows(3, 2, one, again));
  REQUIRE(!m->initial_rows(3, 4, one, other_table));
  REQUIRE(!m->initial_rows(4, 2, one, other_seed));
  CHECK(std::equal(again.begin(), again.end(), rows.begin() + 10));
  CHECK(rows[10] == 0.0f);  // the linear weight starts at zero
  CHECK(std::abs(rows[11]) > 0.0f);
  CHECK(std::abs(rows[11]) < 0.02f);
  CHECK(other_table != again);
  CHECK(other_seed != again);
  std::vector<float> short_out(14);
  CHECK(is(m->initial_rows(3, 2, keys, short_out), errc::invalid_argument));
  CHECK(is(m->initial_rows(3, 26, keys, rows), errc::invalid_argument));
}

TEST_CASE("held-out slices scored apart and merged equal the whole test set scored at once") {
  auto m = make(tiny_config(), 4);
  auto scratch = m->make_scratch();
  std::vector<float> dense(m->layout().dense_size(), 0.0f);
  dense[13] = -1.0f;  // the bias
  auto score = [&](test_slice slice) {
    std::vector<uint64_t> sparse;
    pulled_rows p;
    REQUIRE(!m->test_keys(slice, *scratch, sparse, p.keys));
    CHECK(sparse.empty());
    p.fill(*m, 1, 0.5f);
    // The same row for a key whichever slice pulls it: a function of (table, key).
    for (uint32_t t = 0; t < p.keys.size(); ++t)
      for (size_t i = 0; i < p.keys[t].size(); ++i)
        for (uint32_t j = 0; j < 5; ++j)
          p.rows[t][i * 5 + j] =
              0.3f * static_cast<float>(unit_double(counter_hash(t, p.keys[t][i], j)) - 0.5);
    auto part = m->evaluate_slice(slice, {dense, {}, {}, p.views}, *scratch);
    REQUIRE_MESSAGE(part, keel::test::error_text(part));
    return *part;
  };
  const auto whole = score({0, 1000});
  partial_evaluation merged;
  for (auto slice : {test_slice{600, 400}, test_slice{0, 1}, test_slice{1, 599}})
    merged.merge(score(slice));
  CHECK(merged.examples == 1000);
  CHECK(merged.correct == whole.correct);
  CHECK(merged.loss_nats == whole.loss_nats);
  CHECK(merged.result().metric("auc") == whole.result().metric("auc"));
  CHECK(*whole.result().log_loss > 0.3);
  std::vector<uint64_t> sparse;
  table_key_lists keys;
  CHECK(is(m->test_keys({999, 2}, *scratch, sparse, keys), errc::invalid_argument));
  CHECK(is(m->test_keys({0, 0}, *scratch, sparse, keys), errc::invalid_argument));
  auto full = m->evaluate({dense, {}}, *scratch);
  REQUIRE(!full);
  CHECK(describe(full.error()).find("slices") != std::string::npos);
}

namespace {

ctr_config learnable_config() {
  ctr_config c;
  c.vocabulary = 10'000;
  c.train_examples = 40'000;
  c.test_examples = 8'000;
  c.fm_factors = 8;
  return c;
}

plain_training_result train(const ctr_model& m, uint64_t max_steps = 0) {
  plain_trainer_config pc;
  pc.batch_size = ctr_plain_batch;
  pc.lr = ctr_plain_lr(m.factors());
  pc.optimizer = plain_optimizer::adagrad;
  pc.max_steps = max_steps;
  pc.eval_slice_examples = 3000;  // slices of unequal size, merged
  auto r = train_plain(m, pc);
  REQUIRE_MESSAGE(r, keel::test::error_text(r));
  return std::move(*r);
}

}  // namespace

TEST_CASE("the plain trainer learns the click log: log loss well below the base rate's entropy, "
          "above the Bayes log loss") {
  for (uint32_t factors : {0u, 8u}) {
    auto m = make(learnable_config(), factors);
    CAPTURE(m->name());
    const auto r = train(*m);
    const double loss = *r.final_test.log_loss;
    const double bayes = *m->planted().log_loss;
    MESSAGE(m->name() << ": log loss " << loss << ", Bayes " << bayes << ", entropy "
                      << m->base_entropy() << ", AUC " << *r.final_test.metric("auc")
                      << ", planted AUC " << *m->planted().metric("auc"));
    CHECK(r.skipped_steps == 0);
    CHECK(bayes < loss);
    CHECK(loss < m->base_entropy() - 0.04);
    CHECK(*r.final_test.metric("auc") > 0.7);
    CHECK(*r.final_test.metric("auc") < *m->planted().metric("auc"));
    CHECK(*r.final_test.metric("auc_tie_bound") < 1e-3);
    CHECK(meets(r.final_test, m->target()));
    // Rows were created on first touch only: far fewer than the vocabulary
    // in the long-tail fields, each of the model's width.
    REQUIRE(r.tables.size() == 26);
    CHECK(r.tables[0].rows.size() == r.tables[0].index.size() * m->row_dim());
    CHECK(r.tables[0].index.size() < learnable_config().vocabulary);
  }
}

TEST_CASE("two plain runs of a CTR model end with the same rows, bit for bit") {
  auto m = make(learnable_config(), 8);
  const auto a = train(*m, 30);
  const auto b = train(*m, 30);
  CHECK(a.dense == b.dense);
  for (size_t t = 0; t < a.tables.size(); ++t) {
    REQUIRE(a.tables[t].index.size() == b.tables[t].index.size());
    for (const auto& [key, row] : a.tables[t].index) {
      const float* other = b.tables[t].find(key);
      REQUIRE(other != nullptr);
      CHECK(std::equal(other, other + m->row_dim(), a.tables[t].rows.data() + row * m->row_dim()));
    }
  }
  CHECK(a.final_test.log_loss == b.final_test.log_loss);
}

TEST_CASE("ctr-lr and ctr-fm are in the registry, configured by model_options.ctr") {
  model_options mo;
  mo.ctr = learnable_config();
  mo.ctr.fm_factors = 6;
  auto lr = make_model("ctr-lr", mo);
  auto fm = make_model("ctr-fm", mo);
  REQUIRE(lr);
  REQUIRE(fm);
  CHECK((*lr)->layout().tables()[25].dim == 1);
  CHECK((*fm)->layout().tables()[25].dim == 7);
  CHECK((*fm)->layout().tables()[25].name == "ctr_fm.c26");
  CHECK((*fm)->layout().dense_size() == 14);
  CHECK((*fm)->evaluates_slices());
  mo.ctr.vocabulary = 5;
  auto bad = make_model("ctr-lr", mo);
  REQUIRE(!bad);
  CHECK(describe(bad.error()).find("vocabulary") != std::string::npos);
}
