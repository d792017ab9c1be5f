// Update rules by parameter (training_config::rules) and an application's
// own rule (custom_update_rule): which keys each rule updates, that a
// custom rule's state is shard state (in snapshots: a run through a shard
// kill ends bit-identical), and the errors naming a bad rule.
#include <doctest/doctest.h>

#include "actors/core/shard_core.hpp"
#include "tests/actors/job_fixture.hpp"

namespace keel::test {
namespace {

optimizer_config rule(optimizer_kind k, float lr) {
  optimizer_config o;
  o.kind = k;
  o.lr = lr;
  return o;
}

// A rule whose step depends on its state: slot 0 counts the parameter's
// updates; the first `warm` move it by half the gradient, later ones by the
// whole. A shard restored without its state would count afresh and end
// elsewhere.
std::shared_ptr<const custom_update_rule> warmup_rule(float warm) {
  auto r = std::make_shared<custom_update_rule>();
  r->name = "warmup";
  r->slots = 1;
  r->initial[0] = 0.0f;
  r->apply = [warm](float* p, float* s1, float*, const float* g, size_t n, uint64_t) {
    for (size_t i = 0; i < n; ++i) {
      s1[i] += 1.0f;
      p[i] -= (s1[i] <= warm ? 0.5f : 1.0f) * g[i];
    }
  };
  return r;
}

}  // namespace

TEST_CASE("a shard's dense keys run by rule: each span its own, the rest the shard's optimizer") {
  shard_config c;
  c.dense = {10, 30};
  c.optimizer = rule(optimizer_kind::sgd, 0.1f);
  c.dense_rules = {{{12, 15}, rule(optimizer_kind::momentum, 0.1f)}, {{20, 25}, rule(optimizer_kind::adam, 0.1f)}};
  std::vector<std::tuple<optimizer_kind, uint64_t, uint64_t>> runs;
  for_each_rule_run(c, 11, 16, [&](const optimizer_config& r, uint64_t b, uint64_t n) { runs.emplace_back(r.kind, b, n); });
  using k = optimizer_kind;
  CHECK(runs == std::vector<std::tuple<optimizer_kind, uint64_t, uint64_t>>{
                    {k::sgd, 11, 1}, {k::momentum, 12, 3}, {k::sgd, 15, 5}, {k::adam, 20, 5}, {k::sgd, 25, 2}});
  runs.clear();
  for_each_rule_run(c, 21, 2, [&](const optimizer_config& r, uint64_t b, uint64_t n) { runs.emplace_back(r.kind, b, n); });
  CHECK(runs == std::vector<std::tuple<optimizer_kind, uint64_t, uint64_t>>{{k::adam, 21, 2}});
  CHECK(dense_slots(c) == 2);  // Adam's two, for every key
  c.dense_rules.pop_back();
  CHECK(dense_slots(c) == 1);
  CHECK(!check_rules(c));
  c.dense_rules.push_back({{14, 18}, rule(optimizer_kind::sgd, 0.1f)});  // overlaps [12, 15)
  auto err = check_rules(c);
  REQUIRE(err);
  CHECK(describe(err).find("[14, 18)") != std::string::npos);
}

TEST_CASE("a custom rule updates its tensor, its state in snapshots: a shard kill ends bit-identical, and the rest keeps the job's rule") {
  auto run_with = [](bool kill, bool rules) {
    temp_dir dir;
    auto c = config_for(probe_with_table(), dir, 40);  // SGD lr 1: each BSP step's two pushes add 2
    if (rules) {
      optimizer_config custom;
      custom.kind = optimizer_kind::custom;
      custom.custom = warmup_rule(12);
      c.training.rules["probe.dense"] = custom;
      c.training.rules[probe_model::table_name] = rule(optimizer_kind::adagrad, 0.5f);
    }
    if (kill)
      c.faults.plan = {kill_at("shard:0", 17), kill_at("shard:1", 29)};
    auto r = run(c);
    REQUIRE_MESSAGE(r, describe(r.error()));
    if (kill)
      check_faults_fired(c, *r);
    return *r;
  };
  auto plain = run_with(false, false);
  auto ruled = run_with(false, true);
  // The probe's gradient is -1 a push, -2 a BSP step: the warm-up moves
  // each dense key by 1 for 12 steps, then by 2.
  REQUIRE(!ruled.dense.empty());
  for (float v : ruled.dense) CHECK(v == 12.0f + 2.0f * (40 - 12));
  for (float v : plain.dense) CHECK(v == 2.0f * 40);
  CHECK(ruled.params_sha256 != plain.params_sha256);  // the table's AdaGrad too
  REQUIRE(ruled.tables.size() == 1);
  CHECK(ruled.tables[0].parameter_bytes == ruled.tables[0].rows * probe_model::table_dim * 2 * 4);  // value + accumulator
  auto killed = run_with(true, true);
  CHECK(killed.restarts["shard:0"] >= 1);
  CHECK(killed.params_sha256 == ruled.params_sha256);
  CHECK(killed.pushes_applied == killed.pushes_acked);
}

TEST_CASE("a rule for a parameter the model lacks, or an incomplete custom rule, is refused naming it") {
  temp_dir dir;
  auto c = config_for(probe(), dir, 5);
  c.training.rules["fc1.weight"] = rule(optimizer_kind::adam, 0.01f);
  auto j = job::start(c);
  REQUIRE(!j);
  CHECK(is(j.error(), errc::invalid_argument));
  CHECK(describe(j.error()).find("\"fc1.weight\"") != std::string::npos);
  CHECK(describe(j.error()).find("probe.dense") != std::string::npos);  // what it has
  c.training.rules.clear();
  optimizer_config custom;
  custom.kind = optimizer_kind::custom;
  c.training.rules["probe.dense"] = custom;  // no rule behind it
  j = job::start(c);
  REQUIRE(!j);
  CHECK(describe(j.error()).find("apply function") != std::string::npos);
  auto three = std::make_shared<custom_update_rule>(*warmup_rule(1));
  three->slots = 3;
  custom.custom = three;
  c.training.rules["probe.dense"] = custom;
  j = job::start(c);
  REQUIRE(!j);
  CHECK(describe(j.error()).find("3 state slots") != std::string::npos);
}

}  // namespace keel::test
