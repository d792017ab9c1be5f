// The embedding-table store (actors/core/embedding_table.hpp): rows from the
// initializer, lazy optimizers bit-exact against a plain reference loop,
// refused pushes that change nothing, deterministic eviction, admission, and
// bytes per parameter.
#include "actors/core/embedding_table.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "actors/core/table_snapshot.hpp"
#include "table_fixture.hpp"

using namespace keel;
using namespace keel::table_test;

namespace {

// The reference: one std::map entry a row, each rule written out plainly
// with the arithmetic of the textbook formulas, in the order keel documents.
struct ref_row {
  std::vector<float> v, s1, s2;
};

void ref_update(const optimizer_config& c, uint64_t t, ref_row& r, const float* g) {
  for (size_t i = 0; i < r.v.size(); ++i) {
    float gi = g[i];
    switch (c.kind) {
      case optimizer_kind::sgd:
        r.v[i] -= c.lr * gi;
        break;
      case optimizer_kind::momentum:
        r.s1[i] = c.momentum * r.s1[i] + gi;
        r.v[i] -= c.lr * r.s1[i];
        break;
      case optimizer_kind::adagrad:
        r.s1[i] += gi * gi;
        r.v[i] -= c.lr * gi / (std::sqrt(r.s1[i]) + c.epsilon);
        break;
      case optimizer_kind::adam: {
        float c1 = static_cast<float>(1.0 - std::pow(double{c.beta1}, static_cast<double>(t)));
        float c2 = static_cast<float>(1.0 - std::pow(double{c.beta2}, static_cast<double>(t)));
        float step = c.lr * std::sqrt(c2) / c1;
        r.s1[i] = c.beta1 * r.s1[i] + (1.0f - c.beta1) * gi;
        r.s2[i] = c.beta2 * r.s2[i] + (1.0f - c.beta2) * gi * gi;
        r.v[i] -= step * r.s1[i] / (std::sqrt(r.s2[i]) + c.epsilon);
        break;
      }
      case optimizer_kind::custom:  // its own reference: the rule itself
        c.custom->apply(&r.v[i], r.s1.empty() ? nullptr : &r.s1[i], r.s2.empty() ? nullptr : &r.s2[i], &gi, 1, t);
        break;
    }
  }
}

bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

void check_against_reference(optimizer_kind kind, uint32_t d) {
  optimizer_config c;
  c.kind = kind;
  c.lr = 0.05f;
  auto table = embedding_table::make(config_of("emb", d, c), test_init);
  REQUIRE(table);
  std::map<uint64_t, ref_row> ref;
  std::mt19937_64 rng(3);
  for (uint64_t t = 1; t <= 40; ++t) {
    push p = random_push(rng, 64, 500, d);
    REQUIRE(!table->apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), t));
    for (size_t i = 0; i < p.keys.size(); ++i) {
      auto [it, fresh] = ref.try_emplace(p.keys[i]);
      if (fresh) {
        it->second.v.resize(d);
        test_init(p.keys[i], it->second.v.data(), d);
        it->second.s1.assign(d, kind == optimizer_kind::adagrad ? c.initial_accumulator : 0.0f);
        it->second.s2.assign(d, 0.0f);
      }
      ref_update(c, t, it->second, p.grads.data() + i * d);
    }
  }
  REQUIRE(table->rows() == ref.size());
  for (const auto& [key, r] : ref) {
    const float* row = table->find_row(key);
    REQUIRE(row != nullptr);
    CAPTURE(key);
    CHECK(same_bits(row, r.v.data(), d));
    if (table->state_slots() >= 1)
      CHECK(same_bits(row + d, r.s1.data(), d));
    if (table->state_slots() == 2)
      CHECK(same_bits(row + 2 * d, r.s2.data(), d));
  }
}

}  // namespace

TEST_CASE("a pull reads the initializer's values for keys without rows and creates none") {
  auto table = embedding_table::make(config_of("users", 4), test_init);
  REQUIRE(table);
  std::vector<uint64_t> keys = {5, 1ull << 60, 5};
  std::vector<float> out(12), expected(4);
  REQUIRE(!table->pull(keys.data(), keys.size(), out.data(), out.size()));
  test_init(5, expected.data(), 4);
  CHECK(same_bits(out.data(), expected.data(), 4));
  CHECK(same_bits(out.data() + 8, expected.data(), 4));
  CHECK(table->rows() == 0);
  CHECK(table->find_row(5) == nullptr);
}

TEST_CASE("lazy SGD, momentum, AdaGrad and Adam match a plain per-row loop bit for bit") {
  for (auto kind : {optimizer_kind::sgd, optimizer_kind::momentum, optimizer_kind::adagrad,
                    optimizer_kind::adam})
    for (uint32_t d : {1u, 16u}) {
      CAPTURE(static_cast<int>(kind));
      CAPTURE(d);
      check_against_reference(kind, d);
    }
}

TEST_CASE("a refused push is named and changes nothing") {
  auto table = embedding_table::make(config_of("items", 2, adam(), slot_set(64)), test_init);
  REQUIRE(table);
  auto all = embedding_table::make(config_of("items", 2, adam()), test_init);
  REQUIRE(all);
  std::vector<uint64_t> keys = {1, 2, 3};
  std::vector<float> g = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  REQUIRE(!all->apply(keys.data(), 3, g.data(), 6, 1));
  const auto before = encode_table(*all);

  auto shape = all->apply(keys.data(), 3, g.data(), 5, 2);
  CHECK(shape.code == table_errc::block_shape);
  CHECK(shape.what.find("3 keys with 5 gradient floats (need 6)") != std::string::npos);
  g[3] = std::nanf("");
  auto nan = all->apply(keys.data(), 3, g.data(), 6, 2);
  CHECK(nan.code == table_errc::non_finite);
  CHECK(nan.what.find("key 2 (row 1, column 1)") != std::string::npos);
  g[3] = INFINITY;
  CHECK(all->apply(keys.data(), 3, g.data(), 6, 2).code == table_errc::non_finite);
  g[3] = 0.4f;
  std::vector<uint64_t> twice = {1, 9, 1};
  auto dup = all->apply(twice.data(), 3, g.data(), 6, 2);
  CHECK(dup.code == table_errc::duplicate_key);
  CHECK(dup.what.find("key 1 twice in one push (rows 0 and 2)") != std::string::npos);
  CHECK(encode_table(*all) == before);

  // A table owning no slot refuses every key, for pushes and pulls alike.
  auto outside = table->apply(keys.data(), 3, g.data(), 6, 1);
  CHECK(outside.code == table_errc::key_outside_slots);
  std::vector<float> out(6);
  CHECK(table->pull(keys.data(), 3, out.data(), 6).code == table_errc::key_outside_slots);
  CHECK(table->pull(keys.data(), 3, out.data(), 4).code == table_errc::block_shape);
  CHECK(table->rows() == 0);

  CHECK(all->check_request("users", 2).code == table_errc::name_mismatch);
  CHECK(all->check_request("items", 8).code == table_errc::dim_mismatch);
  CHECK(!all->check_request("items", 2));
}

TEST_CASE("tables that cannot exist are refused with a named error") {
  CHECK(embedding_table::make(config_of("", 4), test_init).error().code ==
        table_errc::invalid_config);
  CHECK(embedding_table::make(config_of("t", 0), test_init).error().code ==
        table_errc::invalid_config);
  CHECK(embedding_table::make(config_of("t", 4), nullptr).error().code ==
        table_errc::invalid_config);
  table_config c = config_of("t", 4);
  c.admission.min_pushes = 3;
  c.admission.sketch_width = 1000;
  CHECK(embedding_table::make(c, test_init).error().what.find("not a power of two") !=
        std::string::npos);
}

TEST_CASE("a full table evicts the least recently updated row, a push's rows ordered by key") {
  table_config c = config_of("lru", 2);
  c.capacity_rows = 4;
  auto table = embedding_table::make(c, test_init);
  REQUIRE(table);
  auto apply = [&](std::vector<uint64_t> keys, uint64_t t) {
    std::vector<float> g(keys.size() * 2, 0.5f);
    REQUIRE(!table->apply(keys.data(), keys.size(), g.data(), g.size(), t));
  };
  apply({2, 1}, 1);  // recency: 1 2
  apply({4, 3}, 2);  // 1 2 3 4
  apply({2}, 3);     // 1 3 4 2
  CHECK(table->keys_in_eviction_order() == std::vector<uint64_t>{1, 3, 4, 2});
  apply({5}, 4);  // evicts 1
  CHECK(table->keys_in_eviction_order() == std::vector<uint64_t>{3, 4, 2, 5});
  // Existing rows first (by key), then the new ones (by key): 7 and 6 evict 3 and 4.
  apply({7, 5, 6}, 5);
  CHECK(table->keys_in_eviction_order() == std::vector<uint64_t>{2, 5, 6, 7});
  CHECK(table->counters().evictions == 3);
  CHECK(table->find_row(1) == nullptr);
  // An evicted key reads its initial value again.
  std::vector<float> out(2), init(2);
  uint64_t one = 1;
  REQUIRE(!table->pull(&one, 1, out.data(), 2));
  test_init(1, init.data(), 2);
  CHECK(same_bits(out.data(), init.data(), 2));
}

TEST_CASE("eviction depends on each push's set of rows, not on their order in the push") {
  table_config c = config_of("lru", 3, adam());
  c.capacity_rows = 100;
  auto a = embedding_table::make(c, test_init);
  auto b = embedding_table::make(c, test_init);
  REQUIRE(a);
  REQUIRE(b);
  std::mt19937_64 rng(5), shuffler(9);
  for (uint64_t t = 1; t <= 50; ++t) {
    push p = random_push(rng, 40, 400, 3);
    REQUIRE(!a->apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), t));
    push q = shuffled(p, shuffler, 3);
    REQUIRE(!b->apply(q.keys.data(), q.keys.size(), q.grads.data(), q.grads.size(), t));
  }
  CHECK(a->counters().evictions > 0);
  CHECK(a->keys_in_eviction_order() == b->keys_in_eviction_order());
  CHECK(encode_table(*a) == encode_table(*b));
}

TEST_CASE("a push that carries every row of a full table drops its new keys and counts them") {
  table_config c = config_of("full", 1);
  c.capacity_rows = 2;
  auto table = embedding_table::make(c, test_init);
  REQUIRE(table);
  std::vector<uint64_t> keys = {1, 2};
  std::vector<float> g = {1.0f, 1.0f, 1.0f};
  REQUIRE(!table->apply(keys.data(), 2, g.data(), 2, 1));
  keys = {3, 2, 1};
  REQUIRE(!table->apply(keys.data(), 3, g.data(), 3, 2));
  CHECK(table->counters().full_refused == 1);
  CHECK(table->counters().evictions == 0);
  CHECK(table->find_row(3) == nullptr);
  CHECK(table->rows() == 2);
}

TEST_CASE("a key becomes a row at its N-th push, earlier pushes dropped and counted") {
  table_config c = config_of("adm", 2);
  c.optimizer.lr = 1.0f;
  c.admission.min_pushes = 3;
  auto table = embedding_table::make(c, test_init);
  REQUIRE(table);
  uint64_t key = 77;
  std::vector<float> g1 = {1.0f, 1.0f}, g3 = {0.25f, 0.5f};
  REQUIRE(!table->apply(&key, 1, g1.data(), 2, 1));
  REQUIRE(!table->apply(&key, 1, g1.data(), 2, 2));
  CHECK(table->rows() == 0);
  CHECK(table->counters().admissions_refused == 2);
  std::vector<float> out(2), init(2);
  REQUIRE(!table->pull(&key, 1, out.data(), 2));
  test_init(key, init.data(), 2);
  CHECK(same_bits(out.data(), init.data(), 2));
  REQUIRE(!table->apply(&key, 1, g3.data(), 2, 3));
  REQUIRE(table->rows() == 1);
  const float* row = table->find_row(key);
  CHECK(row[0] == init[0] - 0.25f);
  CHECK(row[1] == init[1] - 0.5f);
}

TEST_CASE("a small admission sketch admits every key by its N-th push at the latest") {
  table_config c = config_of("adm", 1);
  c.admission.min_pushes = 4;
  c.admission.sketch_width = 64;  // far fewer counters than keys: collisions
  c.admission.sketch_depth = 2;
  auto table = embedding_table::make(c, test_init);
  REQUIRE(table);
  std::vector<uint64_t> keys(500);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 7919;
  std::vector<float> g(keys.size(), 0.1f);
  for (uint64_t t = 1; t <= 4; ++t)
    REQUIRE(!table->apply(keys.data(), keys.size(), g.data(), g.size(), t));
  CHECK(table->rows() == keys.size());
  CHECK(table->counters().admissions_refused < 3 * keys.size());  // some admitted early
  CHECK(table->counters().bytes >= 2 * 64 * sizeof(uint16_t));
}

TEST_CASE("rows of d = 16 with AdaGrad or Adam take at most 1.3 times their values and state") {
  for (auto kind : {optimizer_kind::adagrad, optimizer_kind::adam})
    for (int bound = 0; bound < 3; ++bound) {  // none, LRU, LFU (its count tier a row: 4 bytes more)
      const uint64_t capacity = bound > 0 ? uint64_t{1} << 30 : 0;
      optimizer_config o;
      o.kind = kind;
      table_config c = config_of("big", 16, o);
      c.capacity_rows = capacity;
      if (bound == 2)
        c.eviction = eviction_policy::least_frequently_updated;
      auto table = embedding_table::make(c, test_init);
      REQUIRE(table);
      std::mt19937_64 rng(1);
      for (uint64_t t = 1; t <= 50; ++t) {
        push p = random_push(rng, 4000, uint64_t{1} << 40, 16);
        REQUIRE(!table->apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), t));
      }
      double payload =
          static_cast<double>(table->rows()) * 16 * (1 + table->state_slots()) * sizeof(float);
      double ratio = static_cast<double>(table->bytes()) / payload;
      MESSAGE(std::string(to_string(kind))
              << (capacity ? std::string(" with a capacity, ") + to_string(c.eviction) : std::string())
              << ": " << table->rows() << " rows, " << ratio
              << " bytes per byte of values and state");
      CHECK(ratio <= 1.3);
    }
}

namespace {

// This process's resident bytes, as the kernel counts them (/proc/self/statm).
size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  REQUIRE(f != nullptr);
  unsigned long size = 0, resident = 0;
  int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  REQUIRE(got == 2);
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST_CASE("a table's arena block is resident only as far as its rows reach") {
  // 64 tables of one row each: 64 arena blocks of about 1 MiB that bytes()
  // counts, of which only each block's first row is ever written. Zero-filled
  // blocks were resident whole (ctr-fm on 4 nodes: about 13 MB a node in the
  // last, part-filled block of each of 26 tables).
  std::vector<embedding_table> tables;
  size_t counted = 0;
  size_t before = resident_bytes();
  for (int i = 0; i < 64; ++i) {
    auto t = embedding_table::make(config_of("t" + std::to_string(i), 16, adam()), test_init);
    REQUIRE(t);
    uint64_t key = 7;
    std::vector<float> g(16, 0.5f);
    REQUIRE(!t->apply(&key, 1, g.data(), g.size(), 1));
    counted += t->bytes();
    tables.push_back(std::move(*t));
  }
  size_t grown = resident_bytes() - std::min(before, resident_bytes());
  REQUIRE(counted > size_t{32} << 20);
  CHECK(grown < counted / 8);
  for (auto& t : tables) CHECK(t.find_row(7) != nullptr);
}
