// Least-frequently-updated eviction (actors/core/embedding_table.hpp): the
// victim is the row of the fewest pushes, of those the least recently
// updated, never a row of the push itself; the state after a push depends on
// its set of rows only; counts saturate; full and incremental snapshots
// (format version 2) carry counts and ranks, so that a restored table evicts
// exactly as the one it was taken from; damage and a policy mismatch are
// refused by name; LRU tables keep their format.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "actors/core/embedding_table.hpp"
#include "actors/core/table_delta.hpp"
#include "actors/core/table_snapshot.hpp"
#include "storage/crc32c.hpp"
#include "table_fixture.hpp"

using namespace keel;
using namespace keel::table_test;

namespace {

table_config lfu_config(std::string name, uint32_t d, uint64_t capacity, optimizer_config o = {}) {
  table_config c = config_of(std::move(name), d, o);
  c.capacity_rows = capacity;
  c.eviction = eviction_policy::least_frequently_updated;
  return c;
}

embedding_table made(const table_config& c) {
  auto t = embedding_table::make(c, test_init);
  REQUIRE(t);
  return std::move(*t);
}

void push_keys(embedding_table& t, std::vector<uint64_t> keys, uint64_t step) {
  std::vector<float> g(keys.size() * t.dim(), 0.5f);
  REQUIRE(!t.apply(keys.data(), keys.size(), g.data(), g.size(), step));
}

// Random pushes over a key space with a hot head (a fifth of the keys in
// half the rows), so that update counts spread and evictions happen.
void train(embedding_table& t, std::mt19937_64& rng, uint64_t from, uint64_t steps, uint64_t space) {
  for (uint64_t s = from; s < from + steps; ++s) {
    push hot = random_push(rng, 20, space / 5, t.dim());
    push cold = random_push(rng, 20, space, t.dim());
    push p;
    for (size_t i = 0; i < cold.keys.size(); ++i)
      if (std::find(hot.keys.begin(), hot.keys.end(), cold.keys[i]) == hot.keys.end()) {
        p.keys.push_back(cold.keys[i]);
        p.grads.insert(p.grads.end(), cold.grads.begin() + static_cast<long>(i * t.dim()),
                       cold.grads.begin() + static_cast<long>((i + 1) * t.dim()));
      }
    p.keys.insert(p.keys.end(), hot.keys.begin(), hot.keys.end());
    p.grads.insert(p.grads.end(), hot.grads.begin(), hot.grads.end());
    REQUIRE(!t.apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), s));
  }
}

void reseal(std::vector<unsigned char>& b) {
  uint32_t crc = crc32c(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
}

table_errc decode_code(const std::vector<unsigned char>& b, const table_config& c) {
  auto t = decode_table(b.data(), b.size(), c, test_init);
  return t ? table_errc::ok : t.error().code;
}

// Where a snapshot's (or, with `delta`, a delta's) rows start.
size_t rows_offset(const table_config& c, bool delta = false) {
  return (delta ? table_delta_header_bytes : table_snapshot_header_bytes) + c.name.size() +
         c.slots.words().size() * 8;
}

void put_u32(std::vector<unsigned char>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
uint32_t get_u32(const std::vector<unsigned char>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

void same_table(const embedding_table& a, const embedding_table& b) {
  CHECK(content_sha256(a) == content_sha256(b));
  CHECK(encode_table(a) == encode_table(b));  // state, ranks, counts, counters too
  CHECK(a.keys_in_eviction_order() == b.keys_in_eviction_order());
}

}  // namespace

TEST_CASE("a full LFU table evicts the row of the fewest pushes, the least recently updated of them, never the push's own") {
  auto t = made(lfu_config("lfu", 1, 4));
  push_keys(t, {4, 3, 2, 1}, 1);  // counts 1 1 1 1, updated in key order
  push_keys(t, {2, 1}, 2);        // 1 and 2 at 2
  push_keys(t, {1}, 3);           // 1 at 3
  CHECK(t.keys_in_eviction_order() == std::vector<uint64_t>{3, 4, 2, 1});
  CHECK(t.update_count(1) == 3);
  CHECK(t.update_count(2) == 2);
  CHECK(t.update_count(4) == 1);
  push_keys(t, {5}, 4);  // evicts 3: count 1, updated before 4
  push_keys(t, {6}, 5);  // evicts 4, not 5 (count 1 too, but more recent)
  CHECK(t.keys_in_eviction_order() == std::vector<uint64_t>{5, 6, 2, 1});
  // 5 goes to count 2 first (rows the table has come first), after 2; then
  // 7 evicts 6, the only row left at count 1.
  push_keys(t, {7, 5}, 6);
  CHECK(t.keys_in_eviction_order() == std::vector<uint64_t>{7, 2, 5, 1});
  CHECK(t.find_row(6) == nullptr);
  CHECK(t.update_count(6) == 0);
  // 7 goes to count 2; 10 evicts 2 (lowest count now), then 11's lowest
  // candidate is 10, created by this very push: it evicts 5 instead.
  push_keys(t, {11, 7, 10}, 7);
  CHECK(t.keys_in_eviction_order() == std::vector<uint64_t>{10, 11, 7, 1});
  CHECK(t.counters().evictions == 5);
  CHECK(t.counters().full_refused == 0);
  // A push of every row and a new key: nothing of its own to evict.
  push_keys(t, {1, 7, 10, 11, 12}, 8);
  CHECK(t.counters().full_refused == 1);
  CHECK(t.find_row(12) == nullptr);
  CHECK(t.keys_in_eviction_order() == std::vector<uint64_t>{10, 11, 7, 1});
  CHECK(t.update_count(1) == 4);
}

TEST_CASE("LFU eviction depends on each push's set of rows, not on their order in the push") {
  const table_config c = lfu_config("lfu", 3, 100, adam());
  auto a = made(c), b = made(c);
  std::mt19937_64 rng(5), shuffler(9);
  uint32_t most = 0;
  for (uint64_t t = 1; t <= 60; ++t) {
    push p = random_push(rng, 40, 400, 3);
    REQUIRE(!a.apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), t));
    push q = shuffled(p, shuffler, 3);
    REQUIRE(!b.apply(q.keys.data(), q.keys.size(), q.grads.data(), q.grads.size(), t));
  }
  for (uint64_t k : a.keys_in_order()) most = std::max(most, a.update_count(k));
  CHECK(most > 2);
  CHECK(a.counters().evictions > 0);
  CHECK(a.keys_in_eviction_order() == b.keys_in_eviction_order());
  CHECK(encode_table(a) == encode_table(b));
  // And it is not LRU's order.
  table_config lru = c;
  lru.eviction = eviction_policy::least_recently_updated;
  auto l = made(lru);
  std::mt19937_64 again(5);
  for (uint64_t t = 1; t <= 60; ++t) {
    push p = random_push(again, 40, 400, 3);
    REQUIRE(!l.apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), t));
  }
  CHECK(l.keys_in_order() != a.keys_in_order());
}

TEST_CASE("an update count saturates at 2^32 - 1 and its row stays the most recent of that count") {
  const table_config c = lfu_config("hot", 1, 4);
  auto t = made(c);
  push_keys(t, {1, 2}, 1);
  push_keys(t, {1}, 2);  // ranks: 2 (count 1), 1 (count 2)
  // The counts set near the top through the snapshot (rows of key, rank,
  // count, value, in key order): 4 billion pushes would take too long.
  auto b = encode_table(t);
  const size_t row = 8 + 4 + 4 + 4, first = rows_offset(c);
  REQUIRE(get_u32(b, first + 8) == 1);   // key 1's rank
  REQUIRE(get_u32(b, first + 12) == 2);  // key 1's count
  put_u32(b, first + 12, UINT32_MAX - 1);
  put_u32(b, first + row + 12, UINT32_MAX - 1);  // key 2, rank 0
  reseal(b);
  auto back = decode_table(b.data(), b.size(), c, test_init);
  REQUIRE(back);
  CHECK(back->keys_in_eviction_order() == std::vector<uint64_t>{2, 1});
  push_keys(*back, {2}, 3);
  CHECK(back->update_count(2) == UINT32_MAX);
  CHECK(back->keys_in_eviction_order() == std::vector<uint64_t>{1, 2});
  push_keys(*back, {1}, 4);
  push_keys(*back, {2}, 5);  // saturated: stays at the top, as the most recent
  CHECK(back->update_count(1) == UINT32_MAX);
  CHECK(back->update_count(2) == UINT32_MAX);
  CHECK(back->keys_in_eviction_order() == std::vector<uint64_t>{1, 2});
  push_keys(*back, {3, 4}, 6);
  push_keys(*back, {5}, 7);  // evicts 3
  CHECK(back->keys_in_eviction_order() == std::vector<uint64_t>{4, 5, 1, 2});
  auto again = encode_table(*back);
  auto restored = decode_table(again.data(), again.size(), c, test_init);
  REQUIRE(restored);
  same_table(*restored, *back);
}

TEST_CASE("an LFU table's snapshot (version 2) restores its counts and order, and the restored table evicts as the original") {
  const table_config c = lfu_config("clicks", 4, 300, adam());
  std::mt19937_64 rng(21);
  auto original = made(c);
  train(original, rng, 1, 30, 3000);
  REQUIRE(original.counters().evictions > 0);
  const auto bytes = encode_table(original);
  uint16_t version;
  std::memcpy(&version, bytes.data() + 8, 2);
  CHECK(version == table_snapshot_lfu_version);
  const size_t row = 8 + 4 + 4 + 4 * 4 * 3;
  CHECK(bytes.size() == rows_offset(c) + original.rows() * row + 4);
  auto restored = decode_table(bytes.data(), bytes.size(), c, test_init);
  REQUIRE(restored);
  same_table(*restored, original);
  for (uint64_t k : original.keys_in_order()) CHECK(restored->update_count(k) == original.update_count(k));
  const uint64_t evictions = original.counters().evictions;
  std::mt19937_64 a(99), b(99);
  train(original, a, 31, 20, 3000);
  train(*restored, b, 31, 20, 3000);
  CHECK(original.counters().evictions > evictions);
  same_table(*restored, original);
}

TEST_CASE("LRU tables keep format version 1 and unbounded tables write version 3, rows of the same bytes") {
  for (uint64_t capacity : {uint64_t{0}, uint64_t{300}}) {
    CAPTURE(capacity);
    const uint16_t expected = capacity ? 1 : 3;
    table_config c = config_of("clicks", 4, adam());
    c.capacity_rows = capacity;
    auto t = made(c);
    std::mt19937_64 rng(3);
    train(t, rng, 1, 10, 3000);
    const auto bytes = encode_table(t);
    uint16_t version;
    std::memcpy(&version, bytes.data() + 8, 2);
    CHECK(version == expected);
    const size_t row = 8 + (capacity ? 4 : 0) + 4 * 4 * 3;
    CHECK(bytes.size() == rows_offset(c) + t.rows() * row + 4);
    t.clear_changes();
    train(t, rng, 11, 2, 3000);
    auto delta = encode_table_delta(t);
    std::memcpy(&version, delta.data() + 8, 2);
    CHECK(version == expected);
  }
  // A capacity of 0 makes the policy moot: an "LFU" table without one is an unbounded table.
  table_config moot = lfu_config("clicks", 4, 0);
  auto t = made(moot);
  push_keys(t, {1, 2}, 1);
  auto bytes = encode_table(t);
  CHECK(decode_code(bytes, config_of("clicks", 4)) == table_errc::ok);
}

TEST_CASE("a snapshot of an LFU table is refused by an LRU table, and the other way round, naming the policies") {
  const table_config lfu = lfu_config("clicks", 2, 50);
  table_config lru = lfu;
  lru.eviction = eviction_policy::least_recently_updated;
  auto a = made(lfu), b = made(lru);
  std::mt19937_64 rng(4);
  train(a, rng, 1, 5, 500);
  train(b, rng, 1, 5, 500);
  auto from_lfu = encode_table(a), from_lru = encode_table(b);
  auto refused = decode_table(from_lfu.data(), from_lfu.size(), lru, test_init);
  REQUIRE(!refused);
  CHECK(refused.error().code == table_errc::options_mismatch);
  CHECK_MESSAGE(refused.error().what.find("evicting the least frequently updated row, the shard's table evicts the "
                                          "least recently updated") != std::string::npos,
                refused.error().what);
  CHECK(decode_code(from_lru, lfu) == table_errc::options_mismatch);
  // Deltas too.
  a.clear_changes();
  b.clear_changes();
  train(a, rng, 6, 2, 500);
  train(b, rng, 6, 2, 500);
  auto da = encode_table_delta(a), db = encode_table_delta(b);
  auto to_lru = made(lru), to_lfu = made(lfu);
  CHECK(apply_table_delta(to_lru, da.data(), da.size()).code == table_errc::options_mismatch);
  CHECK(apply_table_delta(to_lfu, db.data(), db.size()).code == table_errc::options_mismatch);
}

TEST_CASE("a damaged LFU snapshot is refused by name: a count of 0, counts out of eviction order, version 2 without a capacity") {
  const table_config c = lfu_config("clicks", 1, 100);
  auto t = made(c);
  std::mt19937_64 rng(8);
  train(t, rng, 1, 10, 400);
  const auto good = encode_table(t);
  REQUIRE(decode_code(good, c) == table_errc::ok);
  const size_t row = 8 + 4 + 4 + 4, first = rows_offset(c);
  auto zero = good;
  put_u32(zero, first + 12, 0);
  reseal(zero);
  CHECK(decode_code(zero, c) == table_errc::count_mismatch);
  // The row that goes first given a count above the one that goes last.
  auto order = good;
  for (size_t r = 0; r < t.rows(); ++r)
    if (get_u32(order, first + r * row + 8) == 0)
      put_u32(order, first + r * row + 12, UINT32_MAX);
  reseal(order);
  auto refused = decode_table(order.data(), order.size(), c, test_init);
  REQUIRE(!refused);
  CHECK(refused.error().code == table_errc::count_mismatch);
  CHECK_MESSAGE(refused.error().what.find("at eviction rank 1") != std::string::npos, refused.error().what);
  auto version = good;
  version[8] = 3;
  reseal(version);
  CHECK(decode_code(version, c) == table_errc::malformed);
  // An unbounded table's snapshot that claims version 2.
  auto unbounded = made(config_of("clicks", 1));
  push_keys(unbounded, {1, 2}, 1);
  auto v2 = encode_table(unbounded);
  v2[8] = 2;
  reseal(v2);
  CHECK(decode_code(v2, config_of("clicks", 1)) == table_errc::malformed);
  CHECK(decode_code(v2, lfu_config("clicks", 1, 0)) == table_errc::malformed);
}

TEST_CASE("an LFU base and its deltas restore the table, which then evicts exactly as the original continuing") {
  const table_config c = lfu_config("users", 3, 200, adam());
  std::mt19937_64 rng(7);
  auto t = made(c);
  train(t, rng, 1, 20, 2000);
  const auto base = encode_table(t);
  t.clear_changes();
  std::vector<std::vector<unsigned char>> deltas;
  for (int d = 0; d < 4; ++d) {
    train(t, rng, 21 + 5 * d, 5, 2000);
    deltas.push_back(encode_table_delta(t));
    t.clear_changes();
  }
  CHECK(t.counters().evictions > 0);
  auto restored = decode_table(base.data(), base.size(), c, test_init);
  REQUIRE(restored);
  for (auto& d : deltas) REQUIRE(!apply_table_delta(*restored, d.data(), d.size()));
  same_table(*restored, t);
  for (uint64_t k : t.keys_in_order()) CHECK(restored->update_count(k) == t.update_count(k));
  const uint64_t evictions = t.counters().evictions;
  std::mt19937_64 a(5), b(5);
  train(t, a, 100, 15, 2500);
  train(*restored, b, 100, 15, 2500);
  CHECK(t.counters().evictions > evictions);
  same_table(*restored, t);
}

TEST_CASE("an LFU delta's changed rows carry their counts, and evicted and re-created rows start again at 1") {
  const table_config c = lfu_config("small", 1, 4);
  auto t = made(c);
  push_keys(t, {1, 2, 3, 4}, 1);
  push_keys(t, {1, 2, 3}, 2);
  const auto base = encode_table(t);
  t.clear_changes();
  push_keys(t, {5}, 3);     // evicts 4
  push_keys(t, {6}, 4);     // evicts 5
  push_keys(t, {1, 4}, 5);  // 1 at 3; 4 evicts 6 and is back at 1
  CHECK(t.keys_in_eviction_order() == std::vector<uint64_t>{4, 2, 3, 1});
  auto plan = plan_table_delta(t);
  CHECK(plan.removed == std::vector<uint64_t>{5, 6});
  REQUIRE(plan.changed.size() == 2);
  CHECK(plan.counts == std::vector<uint32_t>{3, 1});  // keys 1 and 4
  CHECK(plan.ranks == std::vector<uint32_t>{1, 0});
  auto delta = encode_table_delta(t);
  auto restored = decode_table(base.data(), base.size(), c, test_init);
  REQUIRE(restored);
  REQUIRE(!apply_table_delta(*restored, delta.data(), delta.size()));
  same_table(*restored, t);
  CHECK(restored->update_count(4) == 1);
}

TEST_CASE("a damaged LFU delta is refused by name and leaves the table as it was") {
  const table_config c = lfu_config("users", 1, 100);
  std::mt19937_64 rng(12);
  auto t = made(c);
  train(t, rng, 1, 10, 400);
  const auto base = encode_table(t);
  t.clear_changes();
  train(t, rng, 11, 3, 400);
  const auto good = encode_table_delta(t);
  const auto plan = plan_table_delta(t);
  REQUIRE(plan.changed.size() > 2);
  const size_t row = 8 + 4 + 4 + 4, first = rows_offset(c, true);
  auto parent = [&] {
    auto p = decode_table(base.data(), base.size(), c, test_init);
    REQUIRE(p);
    return std::move(*p);
  };
  auto check_refused = [&](std::vector<unsigned char> d, table_errc code) {
    reseal(d);
    auto p = parent();
    CHECK(apply_table_delta(p, d.data(), d.size()).code == code);
    CHECK(encode_table(p) == base);
  };
  auto zero = good;
  put_u32(zero, first + 12, 0);
  check_refused(zero, table_errc::count_mismatch);
  auto order = good;
  for (size_t r = 0; r < plan.changed.size(); ++r)
    if (get_u32(order, first + r * row + 8) == 0)
      put_u32(order, first + r * row + 12, UINT32_MAX);
  check_refused(order, table_errc::count_mismatch);
  auto version = good;
  version[8] = 1;  // read as an LRU delta: its rows are 4 bytes shorter than its counts say
  check_refused(version, table_errc::count_mismatch);
  auto p = parent();
  REQUIRE(!apply_table_delta(p, good.data(), good.size()));
  same_table(p, t);
}
