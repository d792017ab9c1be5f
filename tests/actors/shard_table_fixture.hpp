#pragma once
// Shared pieces of the tests of shards with embedding tables: a pure row
// source, a shard configuration, keys a shard owns, table pushes and pulls.
#include <cstring>
#include <vector>

#include <capnp/message.h>
#include <doctest/doctest.h>

#include "actors/core/shard_core.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"

namespace keel::shard_table_test {

constexpr uint32_t dim = 2;

// Rows start at (key % 7, 1): a pure function of (table, key).
inline void init_rows(uint32_t table, uint64_t key, float* out, uint32_t d) {
  for (uint32_t i = 0; i < d; ++i)
    out[i] = i == 0 ? static_cast<float>(key % 7) + static_cast<float>(table) : 1.0f;
}

inline shard_config table_config_of(consistency_kind kind, uint32_t workers) {
  shard_config c;
  c.shard = 1;
  c.num_workers = workers;
  c.dense = {0, 2};
  c.sparse = {2, 2};
  c.rule = {kind, 0};
  c.optimizer.kind = optimizer_kind::sgd;
  c.optimizer.lr = 1.0f;
  c.tables = {{"users", dim}};
  c.table_slot_owners = default_slot_owners(2);
  return c;
}

// The first `n` keys (from 1 up) whose slots shard `shard` of 2 owns.
inline std::vector<uint64_t> keys_of_shard(uint32_t shard, size_t n) {
  auto slots = owned_slots(default_slot_owners(2), shard);
  std::vector<uint64_t> out;
  for (uint64_t k = 1; out.size() < n; ++k)
    if (slots.contains_key(k))
      out.push_back(k);
  return out;
}

inline shard_core fresh(const shard_config& cfg) {
  auto core = shard_core::make(cfg, std::vector<float>(2, 0.0f), init_rows);
  REQUIRE_MESSAGE(core, describe(core.error()));
  return std::move(*core);
}

struct block {
  uint32_t table = 0;
  uint32_t dim = 2;
  std::vector<uint64_t> keys;
  std::vector<float> rows;
};

// Dense gradients from key `first` on.
struct dense_grads {
  uint64_t first = 0;
  std::vector<float> values;
};

inline push_msg table_push_msg(uint32_t worker, uint64_t seq, uint64_t step, const std::vector<block>& blocks,
                               const std::vector<dense_grads>& dense = {}) {
  size_t words = 256;
  for (auto& d : dense) words += d.values.size() / 2 + 8;
  return build<schema::Push>(words, [&](schema::Push::Builder b) {
    b.setWorker(worker);
    b.setSeq(seq);
    b.setStep(step);
    auto ranges = b.initDense(static_cast<unsigned>(dense.size()));
    for (unsigned i = 0; i < dense.size(); ++i) {
      ranges[i].setBegin(dense[i].first);
      ranges[i].setEnd(dense[i].first + dense[i].values.size());
      std::memcpy(ranges[i].initValues(dense[i].values.size() * 4).begin(), dense[i].values.data(),
                  dense[i].values.size() * 4);
    }
    auto out = b.initTables(blocks.size());
    for (unsigned i = 0; i < blocks.size(); ++i) {
      out[i].setTable(blocks[i].table);
      out[i].setDim(blocks[i].dim);
      auto& k = blocks[i].keys;
      auto& r = blocks[i].rows;
      std::memcpy(out[i].initKeys(k.size() * 8).begin(), k.data(), k.size() * 8);
      std::memcpy(out[i].initRows(r.size() * 4).begin(), r.data(), r.size() * 4);
    }
  });
}

inline decoded<schema::Push> table_push(uint32_t worker, uint64_t seq, uint64_t step, const std::vector<block>& blocks,
                                        const std::vector<dense_grads>& dense = {}) {
  auto d = decode(table_push_msg(worker, seq, step, blocks, dense));
  REQUIRE_MESSAGE(d, describe(d.error()));
  return std::move(*d);
}

// The rows the shard answers for `keys` of table 0, in the order asked.
inline std::vector<float> pull_rows(const shard_core& s, const std::vector<uint64_t>& keys, uint32_t table = 0) {
  auto req = build<schema::PullRequest>(64, [&](schema::PullRequest::Builder b) {
    b.setWorker(0);
    b.setShard(1);
    auto t = b.initTables(1)[0];
    t.setTable(table);
    std::memcpy(t.initKeys(keys.size() * 8).begin(), keys.data(), keys.size() * 8);
  });
  auto d = decode(req);
  REQUIRE(d);
  capnp::MallocMessageBuilder mb;
  auto reply = mb.initRoot<schema::PullReply>();
  auto err = s.read(d->root(), reply);
  REQUIRE_MESSAGE(!err, describe(err));
  auto rows = reply.asReader().getTables()[0].getRows();
  std::vector<float> out(rows.size() / 4);
  std::memcpy(out.data(), rows.begin(), rows.size());
  return out;
}


}  // namespace keel::shard_table_test
