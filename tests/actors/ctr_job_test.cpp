// Whole jobs of a model with embedding tables (ctr-lr: 26 tables of rows of
// 1, hashed IDs over a vocabulary of 10^5 a field): shards hold the rows,
// workers pull and push them, the read-out hashes them where they live and
// scores the held-out set slice by slice. BSP runs with shards killed must
// end bit-identical to the fault-free run, every acknowledged push applied
// exactly once.
#include <cmath>

#include "job_fixture.hpp"
#include "models/model_registry.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::shared_ptr<const model> small_ctr(const std::string& name) {
  model_options mo;
  mo.ctr.vocabulary = 100'000;
  mo.ctr.train_examples = 8192;
  mo.ctr.test_examples = 5000;  // two slices: one full, one partial
  mo.ctr.fm_factors = 4;
  auto m = make_model(name, mo);
  REQUIRE_MESSAGE(m, describe(m.error()));
  return *m;
}

job_config ctr_config_for(std::shared_ptr<const model> m, const temp_dir& dir) {
  auto c = config_for(std::move(m), dir, 40);
  c.training.optimizer.kind = optimizer_kind::adagrad;  // per-row state must survive restores too
  c.training.optimizer.lr = 0.5f;
  c.training.batch_size = 32;
  return c;
}

}  // namespace

TEST_CASE("a ctr-lr job with shards killed ends with the clean run's params_sha256, every push applied once") {
  auto model = small_ctr("ctr-lr");
  temp_dir clean_dir;
  auto clean_cfg = ctr_config_for(model, clean_dir);
  auto clean = run(clean_cfg);
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(clean->pushes_applied == clean->pushes_acked);
  REQUIRE(clean->quality.log_loss);
  CHECK(std::isfinite(*clean->quality.log_loss));
  CHECK(*clean->quality.log_loss < std::log(2.0));  // it learned something
  REQUIRE(clean->quality.metric("auc"));
  CHECK(*clean->quality.metric("auc") > 0.55);
  CHECK(clean->quality.examples == 5000);
  std::vector<std::vector<fault>> schedules = {
    {kill_at("shard:1", 17)},
    {kill_at("shard:0", 9), kill_at("worker:1", 26)},
  };
  for (auto& kills : schedules) {
    CAPTURE(to_string(kills));
    temp_dir dir;
    auto c = ctr_config_for(model, dir);
    c.faults.plan = kills;
    auto r = run(c);
    REQUIRE_MESSAGE(r, describe(r.error()));
    check_faults_fired(c, *r);
    for (auto& k : kills) CHECK(count(*r, event_kind::restart, k.target) >= 1);
    CHECK(r->pushes_applied == r->pushes_acked);
    CHECK(r->params_sha256 == clean->params_sha256);
    CHECK(r->quality.log_loss == clean->quality.log_loss);
  }
}

TEST_CASE("a ctr-fm job (rows of 5) with a shard killed ends bit-identical, and its hash is not the dense part's alone") {
  auto model = small_ctr("ctr-fm");
  temp_dir clean_dir, dir;
  auto clean_cfg = ctr_config_for(model, clean_dir);
  clean_cfg.training.steps = 24;
  auto clean = run(clean_cfg);
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(clean->params_sha256 != params_sha256(clean->dense, clean->sparse));
  auto c = clean_cfg;
  c.checkpoints.dir = dir.path();
  c.faults.plan = {kill_at("shard:1", 13)};
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_faults_fired(c, *r);
  CHECK(r->pushes_applied == r->pushes_acked);
  CHECK(r->params_sha256 == clean->params_sha256);
}
