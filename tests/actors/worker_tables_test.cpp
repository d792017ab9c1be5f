// A worker_core with an embedding table against two real shard_cores: the
// batch's keys split by the job's slot map into per-shard pulls, the rows
// assembled in the model's key order, the gradient rows split the same way
// into pushes the shards apply.
#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "actors/core/shard_core.hpp"
#include "actors/core/worker_core.hpp"
#include "messages/decode.hpp"

using namespace keel;
using Status = schema::PushAck::Status;

namespace {

constexpr uint32_t dim = 3;

void init_rows(uint32_t, uint64_t key, float* out, uint32_t d) {
  for (uint32_t i = 0; i < d; ++i) out[i] = static_cast<float>(key) + 0.25f * static_cast<float>(i);
}

shard_core table_shard(uint32_t shard) {
  shard_config c;
  c.shard = shard;
  c.num_workers = 1;
  c.rule = {consistency_kind::asp, 0};
  c.optimizer.kind = optimizer_kind::sgd;
  c.optimizer.lr = 1.0f;
  c.tables = {{"items", dim}};
  c.table_slot_owners = default_slot_owners(2);
  auto core = shard_core::make(c, {}, init_rows);
  REQUIRE_MESSAGE(core, describe(core.error()));
  return std::move(*core);
}

worker_core table_worker() {
  worker_core_config c;
  c.worker = 0;
  c.parts = partition_keys(0, 0, 2);
  c.shard_names = {"shard:0", "shard:1"};
  c.total_steps = 4;
  c.rule = consistency_kind::asp;
  c.table_dims = {dim};
  worker_core w(c);
  for (uint32_t i = 0; i < 2; ++i) w.shard_up(i, 1);
  auto gen = w.generation();
  w.status_received(gen, 0, 0);
  REQUIRE(w.status_received(gen, 1, 0) == worker_core::resume_outcome::start);
  REQUIRE(w.next_step() == worker_core::step_start::pull);
  return w;
}

// The shard's reply to the worker's pull.
decoded<schema::PullReply> serve(const shard_core& s, const worker_core& w, uint32_t shard) {
  auto req = decode(w.pull_request(shard));
  REQUIRE_MESSAGE(req, describe(req.error()));
  caf::error err;
  auto m = build<schema::PullReply>(256, [&](schema::PullReply::Builder b) { err = s.read(req->root(), b); });
  REQUIRE_MESSAGE(!err, describe(err));
  auto d = decode(m);
  REQUIRE_MESSAGE(d, describe(d.error()));
  return std::move(*d);
}

}  // namespace

TEST_CASE("a worker pulls each table row from the shard its slot owns and pushes its gradient row there") {
  std::vector<shard_core> shards;
  shards.push_back(table_shard(0));
  shards.push_back(table_shard(1));
  auto w = table_worker();
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= 40; ++k) keys.push_back(k);  // ascending, spread over both shards
  w.begin_pull({}, {keys});
  for (uint32_t s = 0; s < 2; ++s) {
    auto r = serve(shards[s], w, s);
    auto all = w.pulled(s, r.root());
    REQUIRE_MESSAGE(all, describe(all.error()));
    CHECK(*all == (s == 1));
  }
  auto view = w.parameters();
  REQUIRE(view.tables.size() == 1);
  REQUIRE(view.tables[0].keys.size() == keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    CHECK(view.tables[0].keys[i] == keys[i]);
    CHECK(view.tables[0].rows[i * dim + 2] == static_cast<float>(keys[i]) + 0.5f);
  }
  gradient_buffer g;
  g.tables.resize(1);
  g.tables[0].keys = keys;
  for (auto k : keys)
    for (uint32_t i = 0; i < dim; ++i) g.tables[0].rows.push_back(static_cast<float>(k));
  auto round = w.begin_push(g);
  CHECK_FALSE(round.skipped);
  REQUIRE(round.pushes.size() == 2);
  for (uint32_t s = 0; s < 2; ++s) {
    auto p = decode(round.pushes[s]);
    REQUIRE_MESSAGE(p, describe(p.error()));
    CHECK(shards[s].offer(std::move(*p)).status == Status::APPLIED);
  }
  // Every key's row is now init - key (SGD, lr 1), on the shard its slot gives.
  size_t rows = 0;
  for (uint32_t s = 0; s < 2; ++s) {
    rows += shards[s].tables()[0].rows();
    for (auto k : keys) {
      auto* row = shards[s].tables()[0].find_row(k);
      if (!row)
        continue;
      CHECK(shards[s].tables()[0].config().slots.contains_key(k));
      CHECK(row[1] == 0.25f);
    }
  }
  CHECK(rows == keys.size());
  CHECK(shards[0].tables()[0].rows() > 0);
  CHECK(shards[1].tables()[0].rows() > 0);
}

TEST_CASE("a push of table rows is built in one segment of its own size, not in segments that double") {
  // The replay log holds pushes as built: before, a push of 96 kB held
  // buffers of 2.3 times that (ctr-fm, bench/cluster/ctr_cluster.sh).
  auto w = table_worker();
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; k <= 4000; ++k) keys.push_back(k);
  w.begin_pull({}, {keys});
  std::vector<shard_core> shards;
  shards.push_back(table_shard(0));
  shards.push_back(table_shard(1));
  for (uint32_t s = 0; s < 2; ++s) REQUIRE(w.pulled(s, serve(shards[s], w, s).root()));
  gradient_buffer g;
  g.tables.resize(1);
  g.tables[0].keys = keys;
  g.tables[0].rows.assign(keys.size() * dim, 0.5f);
  auto round = w.begin_push(g);
  REQUIRE(round.pushes.size() == 2);
  size_t payload_words = 0;
  for (auto& m : round.pushes) {
    REQUIRE(m.frame()->segments().size() == 1);
    auto p = decode(m);
    REQUIRE(p);
    auto blocks = p->root().getTables();
    REQUIRE(blocks.size() == 1);
    size_t n = blocks[0].getKeys().size() / 8;
    size_t words = n + (n * dim * 4 + 7) / 8;
    payload_words += words;
    CHECK(m.frame()->size_words() <= words + 128);  // the push's header and the hint's 64 words
  }
  CHECK(payload_words == keys.size() + (keys.size() * dim * 4) / 8);
}
