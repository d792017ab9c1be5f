// Incremental table snapshots (actors/core/table_delta.hpp): a parent's
// table plus the deltas after it is the table they were taken from (rows,
// state, recency, sketch, counters) and continues bit-identically; a delta
// holds only the rows that changed; every damage, and a delta applied to
// another parent, is refused by name.
#include "actors/core/table_delta.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "actors/core/table_snapshot.hpp"
#include "storage/crc32c.hpp"
#include "table_fixture.hpp"

using namespace keel;
using namespace keel::table_test;

namespace {

void train(embedding_table& t, std::mt19937_64& rng, uint64_t from, uint64_t steps, size_t keys, uint64_t space) {
  for (uint64_t s = from; s < from + steps; ++s) {
    push p = random_push(rng, keys, space, t.dim());
    REQUIRE(!t.apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), s));
  }
}

embedding_table decoded(const std::vector<unsigned char>& b, const table_config& c) {
  auto t = decode_table(b.data(), b.size(), c, test_init);
  REQUIRE(t);
  return std::move(*t);
}

void same_table(const embedding_table& a, const embedding_table& b) {
  CHECK(content_sha256(a) == content_sha256(b));
  CHECK(encode_table(a) == encode_table(b));  // state, recency ranks, sketch, counters too
  CHECK(a.keys_in_eviction_order() == b.keys_in_eviction_order());
}

table_config bounded_config() {
  table_config c = config_of("clicks", 4, adam());
  c.capacity_rows = 300;
  c.admission.min_pushes = 2;
  c.admission.sketch_width = 1024;
  return c;
}

void reseal(std::vector<unsigned char>& b) {
  uint32_t crc = crc32c(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
}

}  // namespace

TEST_CASE("a base and its deltas restore the table they were taken from, which then continues bit-identically") {
  for (bool bounded : {false, true}) {
    CAPTURE(bounded);
    const table_config c = bounded ? bounded_config() : config_of("users", 3, adam());
    std::mt19937_64 rng(7);
    auto t = embedding_table::make(c, test_init);
    REQUIRE(t);
    train(*t, rng, 1, 20, 40, 2000);
    const auto base = encode_table(*t);
    t->clear_changes();
    std::vector<std::vector<unsigned char>> deltas;
    for (int d = 0; d < 3; ++d) {
      train(*t, rng, 21 + 5 * d, 5, 40, 2000);
      deltas.push_back(encode_table_delta(*t));
      t->clear_changes();
    }
    if (bounded)
      CHECK(t->counters().evictions > 0);
    embedding_table restored = decoded(base, c);
    for (auto& d : deltas) REQUIRE(!apply_table_delta(restored, d.data(), d.size()));
    same_table(restored, *t);
    CHECK(restored.changed_rows() == 0);
    std::mt19937_64 a(5), b(5);
    train(*t, a, 100, 10, 40, 2500);
    train(restored, b, 100, 10, 40, 2500);
    same_table(restored, *t);
  }
}

TEST_CASE("a delta holds the rows that changed and the keys evicted, not the table") {
  table_config c = config_of("ids", 2);
  auto t = embedding_table::make(c, test_init);
  REQUIRE(t);
  std::mt19937_64 rng(3);
  train(*t, rng, 1, 50, 100, 100000);
  REQUIRE(t->rows() > 4000);
  t->clear_changes();
  // Nothing changed: header, name, slot bitmap, CRC.
  CHECK(encode_table_delta(*t).size() == table_delta_header_bytes + 3 + c.slots.words().size() * 8 + 4);
  std::vector<uint64_t> keys = {t->keys_in_order()[0], t->keys_in_order()[1], 7777777};
  std::vector<float> g(keys.size() * 2, 0.5f);
  REQUIRE(!t->apply(keys.data(), keys.size(), g.data(), g.size(), 51));
  CHECK(t->changed_rows() == 3);
  auto plan = plan_table_delta(*t);
  REQUIRE(plan.changed.size() == 3);
  CHECK(plan.changed[2].first == 7777777);
  CHECK(plan.removed.empty());
  auto counts = table_delta_counts_of(encode_table_delta(*t).data(), plan.bytes);
  REQUIRE(counts);
  CHECK(counts->changed == 3);
  CHECK(counts->rows_after == t->rows());
}

TEST_CASE("evicted rows are removed by the delta, and an evicted key pushed again is a changed row") {
  table_config c = config_of("small", 1);
  c.capacity_rows = 4;
  auto t = embedding_table::make(c, test_init);
  REQUIRE(t);
  auto push_keys = [&](std::vector<uint64_t> keys, uint64_t step) {
    std::vector<float> g(keys.size(), 1.0f);
    REQUIRE(!t->apply(keys.data(), keys.size(), g.data(), g.size(), step));
  };
  push_keys({1, 2, 3, 4}, 1);
  const auto base = encode_table(*t);
  t->clear_changes();
  push_keys({5, 6}, 2);  // evicts 1 and 2
  push_keys({1}, 3);     // evicts 3; 1 is back
  auto plan = plan_table_delta(*t);
  CHECK(plan.removed == std::vector<uint64_t>{2, 3});
  CHECK(plan.changed.size() == 3);
  auto delta = encode_table_delta(*t);
  auto restored = decoded(base, c);
  REQUIRE(!apply_table_delta(restored, delta.data(), delta.size()));
  same_table(restored, *t);
  CHECK(restored.keys_in_eviction_order() == std::vector<uint64_t>{4, 5, 6, 1});
}

TEST_CASE("a delta that is damaged, or applied to another parent or table, is refused by name") {
  const table_config c = bounded_config();
  std::mt19937_64 rng(11);
  auto t = embedding_table::make(c, test_init);
  REQUIRE(t);
  train(*t, rng, 1, 10, 40, 2000);
  const auto base = encode_table(*t);
  t->clear_changes();
  train(*t, rng, 11, 3, 40, 2000);
  const auto delta = encode_table_delta(*t);
  auto code = [&](std::vector<unsigned char> d, const std::vector<unsigned char>& parent, const table_config& cfg) {
    auto p = decode_table(parent.data(), parent.size(), cfg, test_init);
    REQUIRE(p);
    return apply_table_delta(*p, d.data(), d.size()).code;
  };
  CHECK(code(delta, base, c) == table_errc::ok);
  auto flipped = delta;
  flipped[flipped.size() / 2] ^= 0x10;
  CHECK(code(flipped, base, c) == table_errc::crc_mismatch);
  auto torn = delta;
  torn.resize(torn.size() - 9);
  CHECK(code(torn, base, c) == table_errc::count_mismatch);
  CHECK(code({delta.begin(), delta.begin() + 50}, base, c) == table_errc::malformed);
  CHECK(code(base, base, c) == table_errc::malformed);  // a full snapshot is not a delta
  // Another parent: the table before the base's last pushes.
  std::mt19937_64 other(12);
  auto o = embedding_table::make(c, test_init);
  REQUIRE(o);
  train(*o, other, 1, 4, 40, 2000);
  CHECK(code(delta, encode_table(*o), c) == table_errc::count_mismatch);
  // Another table's configuration.
  table_config renamed = c;
  renamed.name = "views";
  auto renamed_base = encode_table(*embedding_table::make(renamed, test_init));
  CHECK(code(delta, renamed_base, renamed) == table_errc::name_mismatch);
  // A row made non-finite behind a valid CRC.
  auto nan = delta;
  const size_t first_value = table_delta_header_bytes + c.name.size() + c.slots.words().size() * 8 + 8 + 4;
  const float bad = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan.data() + first_value, &bad, 4);
  reseal(nan);
  CHECK(code(nan, base, c) == table_errc::non_finite);
}

TEST_CASE("more evictions than the table holds drop the change list: only a full snapshot will do") {
  table_config c = config_of("churn", 1);
  c.capacity_rows = 10;
  auto t = embedding_table::make(c, test_init);
  REQUIRE(t);
  std::mt19937_64 rng(1);
  train(*t, rng, 1, 14000, 10, UINT64_MAX / 2);  // 140k new keys: ~140k evictions
  CHECK_FALSE(t->changes_complete());
  CHECK_THROWS_AS(plan_table_delta(*t), std::logic_error);
  t->clear_changes();
  CHECK(t->changes_complete());
  CHECK(t->evicted_keys().empty());
}
