// A ctr-lr job whose embedding tables evict the least frequently updated
// row (table_limits::eviction): a shard killed and restored from its base and
// deltas ends bit-identical to the run without the kill, and the policy is
// part of the run's identity (a resume with another one is refused by name).
#include "actors/faults/recovery.hpp"
#include "actors/job/job_identity.hpp"
#include "job_fixture.hpp"
#include "models/model_registry.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::shared_ptr<const model> small_ctr_lr() {
  model_options mo;
  mo.ctr.vocabulary = 100'000;
  mo.ctr.train_examples = 8192;
  mo.ctr.test_examples = 2000;
  auto m = make_model("ctr-lr", mo);
  REQUIRE_MESSAGE(m, describe(m.error()));
  return *m;
}

// 40 steps, a checkpoint every 10: a base, then deltas (however large).
job_config lfu_config(std::shared_ptr<const model> m, const temp_dir& dir, eviction_policy eviction) {
  auto c = config_for(std::move(m), dir, 40);
  c.training.optimizer.kind = optimizer_kind::adagrad;
  c.training.optimizer.lr = 0.5f;
  c.training.batch_size = 32;
  c.training.tables.capacity_rows = 300;  // far fewer than the run touches
  c.training.tables.eviction = eviction;
  c.checkpoints.incremental.full_every = 8;
  c.checkpoints.incremental.delta_fraction = 1000;
  return c;
}

uint64_t evictions_of(const job_result& r) {
  uint64_t n = 0;
  for (auto& t : r.tables) n += t.evictions;
  return n;
}

}  // namespace

TEST_CASE("a ctr-lr job with LFU eviction and a shard killed ends with the clean run's params_sha256, and differs from LRU") {
  auto model = small_ctr_lr();
  temp_dir clean_dir;
  auto clean = run(lfu_config(model, clean_dir, eviction_policy::least_frequently_updated));
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(evictions_of(*clean) > 0);

  temp_dir killed_dir;
  auto c = lfu_config(model, killed_dir, eviction_policy::least_frequently_updated);
  c.faults.plan = {kill_at("shard:1", 37)};  // restored from checkpoint 3: the base at 10 and two deltas
  auto killed = run(c);
  REQUIRE_MESSAGE(killed, describe(killed.error()));
  check_faults_fired(c, *killed);
  CHECK(count(*killed, event_kind::restart, "shard:1") >= 1);
  for (auto& r : recoveries(killed->events))
    if (r.victim == "shard:1")
      CHECK_MESSAGE(r.restored_from != "fresh", r.restored_from);
  CHECK(killed->pushes_applied == killed->pushes_acked);
  CHECK(killed->params_sha256 == clean->params_sha256);
  CHECK(evictions_of(*killed) == evictions_of(*clean));
  REQUIRE(killed->tables.size() == clean->tables.size());
  for (size_t t = 0; t < clean->tables.size(); ++t) CHECK(killed->tables[t].rows == clean->tables[t].rows);

  // The policy reached the shards: LRU evicts other rows.
  temp_dir lru_dir;
  auto lru = run(lfu_config(model, lru_dir, eviction_policy::least_recently_updated));
  REQUIRE_MESSAGE(lru, describe(lru.error()));
  CHECK(lru->params_sha256 != clean->params_sha256);

  // A resume of the LFU run's checkpoints with LRU is another run.
  auto other = lfu_config(model, killed_dir, eviction_policy::least_recently_updated);
  other.checkpoints.resume = true;
  auto refused = job::start(other);
  REQUIRE(!refused);
  CHECK_MESSAGE(describe(refused.error()).find("table_eviction (lfu there, none here)") != std::string::npos,
                describe(refused.error()));
}

TEST_CASE("the eviction policy is in the run's configuration only when it is LFU, and needs a capacity") {
  temp_dir dir;
  auto c = lfu_config(small_ctr_lr(), dir, eviction_policy::least_recently_updated);
  const auto lru_text = run_configuration(c);
  CHECK(lru_text.find("table_eviction") == std::string::npos);  // LRU runs' identities as they were
  c.training.tables.eviction = eviction_policy::least_frequently_updated;
  CHECK(run_configuration(c).find("table_eviction=lfu\n") != std::string::npos);
  c.training.tables.capacity_rows = 0;
  auto refused = job::start(c);
  REQUIRE(!refused);
  CHECK_MESSAGE(describe(refused.error()).find("table eviction lfu without a capacity") != std::string::npos,
                describe(refused.error()));
}
