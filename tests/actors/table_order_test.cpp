// Snapshots and deltas of tables without a capacity in the table's own
// order (format version 3, actors/core/table_snapshot.hpp and
// table_delta.hpp): written as the rows lie in memory and restored into the
// same places, still checked row by row (repeated keys, keys outside the
// slots, NaN), and the key-ordered version 1 that earlier builds wrote for
// these tables still read.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "actors/core/table_delta.hpp"
#include "actors/core/table_snapshot.hpp"
#include "storage/crc32c.hpp"
#include "table_fixture.hpp"

using namespace keel;
using namespace keel::table_test;

namespace {

constexpr uint32_t dim = 4;
constexpr size_t row_bytes = 8 + dim * 3 * 4;  // key, values, Adam's two state slots

embedding_table trained(const table_config& c, uint64_t from, uint64_t steps, std::mt19937_64& rng,
                        embedding_table* into = nullptr) {
  auto made = embedding_table::make(c, test_init);
  REQUIRE(made);
  embedding_table& t = into ? *into : *made;
  for (uint64_t s = from; s < from + steps; ++s) {
    push p = random_push(rng, 40, 5000, c.dim);
    REQUIRE(!t.apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), s));
  }
  return std::move(*made);
}

void reseal(std::vector<unsigned char>& b) {
  uint32_t crc = crc32c(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
}

uint16_t version_of(const std::vector<unsigned char>& b) {
  uint16_t v;
  std::memcpy(&v, b.data() + 8, 2);
  return v;
}

size_t rows_offset(const table_config& c, size_t header) {
  return header + c.name.size() + c.slots.words().size() * 8;
}

uint64_t key_of_row(const std::vector<unsigned char>& b, size_t at, size_t i) {
  uint64_t k;
  std::memcpy(&k, b.data() + at + i * row_bytes, 8);
  return k;
}

table_errc decode_code(const std::vector<unsigned char>& b, const table_config& c) {
  auto t = decode_table(b.data(), b.size(), c, test_init);
  return t ? table_errc::ok : t.error().code;
}

table_errc delta_code(const std::vector<unsigned char>& base, const std::vector<unsigned char>& delta,
                      const table_config& c) {
  auto t = decode_table(base.data(), base.size(), c, test_init);
  REQUIRE(t);
  auto e = apply_table_delta(*t, delta.data(), delta.size());
  return e ? e.code : table_errc::ok;
}

}  // namespace

TEST_CASE("a table without a capacity is written in its own order and restored into the same places") {
  const table_config c = config_of("clicks", dim, adam());
  std::mt19937_64 rng(5);
  embedding_table original = trained(c, 1, 20, rng);
  const auto bytes = encode_table(original);
  CHECK(version_of(bytes) == table_snapshot_arena_version);
  REQUIRE(bytes.size() == rows_offset(c, table_snapshot_header_bytes) + original.rows() * row_bytes + 4);
  // The rows as they were created (random pushes): not ascending.
  const size_t at = rows_offset(c, table_snapshot_header_bytes);
  bool ascending = true;
  for (size_t i = 1; i < original.rows(); ++i) ascending = ascending && key_of_row(bytes, at, i - 1) < key_of_row(bytes, at, i);
  CHECK(!ascending);

  auto restored = decode_table(bytes.data(), bytes.size(), c, test_init);
  REQUIRE(restored);
  CHECK(encode_table(*restored) == bytes);  // the same rows in the same places
  CHECK(content_sha256(*restored) == content_sha256(original));
  std::mt19937_64 a(77), b(77);
  trained(c, 21, 10, a, &original);
  trained(c, 21, 10, b, &*restored);
  CHECK(encode_table(*restored) == encode_table(original));
}

TEST_CASE("a snapshot of a table without a capacity in key order (version 1, earlier builds) is still read") {
  const table_config c = config_of("clicks", dim, adam());
  std::mt19937_64 rng(6);
  const embedding_table original = trained(c, 1, 20, rng);
  auto v1 = encode_table(original);
  const size_t at = rows_offset(c, table_snapshot_header_bytes);
  std::vector<std::vector<unsigned char>> rows;
  for (size_t i = 0; i < original.rows(); ++i)
    rows.emplace_back(v1.begin() + at + i * row_bytes, v1.begin() + at + (i + 1) * row_bytes);
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    uint64_t a, b;
    std::memcpy(&a, x.data(), 8), std::memcpy(&b, y.data(), 8);
    return a < b;
  });
  for (size_t i = 0; i < rows.size(); ++i) std::copy(rows[i].begin(), rows[i].end(), v1.begin() + at + i * row_bytes);
  const uint16_t one = 1;
  std::memcpy(v1.data() + 8, &one, 2);
  reseal(v1);
  auto restored = decode_table(v1.data(), v1.size(), c, test_init);
  REQUIRE(restored);
  CHECK(content_sha256(*restored) == content_sha256(original));
  CHECK(version_of(encode_table(*restored)) == table_snapshot_arena_version);  // written anew in version 3

  auto unordered = v1;  // version 1 keeps its rule: keys ascending
  std::swap_ranges(unordered.begin() + at, unordered.begin() + at + row_bytes, unordered.begin() + at + row_bytes);
  reseal(unordered);
  CHECK(decode_code(unordered, c) == table_errc::malformed);
}

TEST_CASE("a version 3 snapshot with a repeated key, a foreign key, NaN or a capacity is refused by name") {
  slot_set half;
  for (uint32_t s = 0; s < default_slot_count; s += 2) half.add(s);
  const table_config c = config_of("clicks", dim, adam(), half);
  std::mt19937_64 rng(7);
  auto t = embedding_table::make(c, test_init);
  REQUIRE(t);
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; keys.size() < 30; ++k)
    if (half.contains_key(k))
      keys.push_back(k);
  std::vector<float> grads(keys.size() * dim, 0.5f);
  REQUIRE(!t->apply(keys.data(), keys.size(), grads.data(), grads.size(), 1));
  const auto good = encode_table(*t);
  REQUIRE(decode_code(good, c) == table_errc::ok);
  const size_t at = rows_offset(c, table_snapshot_header_bytes);

  auto twice = good;
  std::memcpy(twice.data() + at + 7 * row_bytes, twice.data() + at + 3 * row_bytes, 8);
  reseal(twice);
  CHECK(decode_code(twice, c) == table_errc::duplicate_key);

  auto foreign = good;
  uint64_t outside = 1;
  while (half.contains_key(outside)) ++outside;
  std::memcpy(foreign.data() + at + 5 * row_bytes, &outside, 8);
  reseal(foreign);
  CHECK(decode_code(foreign, c) == table_errc::key_outside_slots);

  auto nan = good;
  const float q = std::nanf("");
  std::memcpy(nan.data() + at + 9 * row_bytes + 8 + 4, &q, 4);
  reseal(nan);
  CHECK(decode_code(nan, c) == table_errc::non_finite);

  auto capacity = good;  // version 3 is for tables without one
  const uint64_t cap = 100;
  std::memcpy(capacity.data() + 32, &cap, 8);
  reseal(capacity);
  CHECK(decode_code(capacity, c) == table_errc::malformed);

  auto swapped = good;  // any order of distinct keys is a table: restored as it lies
  std::swap_ranges(swapped.begin() + at, swapped.begin() + at + row_bytes, swapped.begin() + at + 2 * row_bytes);
  reseal(swapped);
  auto restored = decode_table(swapped.data(), swapped.size(), c, test_init);
  REQUIRE(restored);
  CHECK(content_sha256(*restored) == content_sha256(*t));
  CHECK(encode_table(*restored) == swapped);
}

TEST_CASE("a version 3 delta keeps the rows' places, and a repeated key or a removal in it is refused") {
  const table_config c = config_of("clicks", dim, adam());
  std::mt19937_64 rng(8);
  embedding_table t = trained(c, 1, 10, rng);
  const auto base = encode_table(t);
  const uint64_t base_rows = t.rows();
  t.clear_changes();
  trained(c, 11, 5, rng, &t);
  REQUIRE(t.rows() > base_rows + 2);
  const auto delta = encode_table_delta(t);
  CHECK(version_of(delta) == table_delta_arena_version);
  auto restored = decode_table(base.data(), base.size(), c, test_init);
  REQUIRE(restored);
  REQUIRE(!apply_table_delta(*restored, delta.data(), delta.size()));
  CHECK(encode_table(*restored) == encode_table(t));  // new rows where they were created

  const size_t at = rows_offset(c, table_delta_header_bytes);
  uint64_t changed;
  std::memcpy(&changed, delta.data() + 88, 8);
  REQUIRE(changed > 4);
  REQUIRE(restored->rows() == t.rows());
  auto parent = decode_table(base.data(), base.size(), c, test_init);
  REQUIRE(parent);
  // Rows in ascending row numbers: the base's updated rows first, the new ones last.
  REQUIRE(parent->find_row(key_of_row(delta, at, 0)) != nullptr);
  REQUIRE(parent->find_row(key_of_row(delta, at, 1)) != nullptr);
  REQUIRE(parent->find_row(key_of_row(delta, at, changed - 1)) == nullptr);
  REQUIRE(parent->find_row(key_of_row(delta, at, changed - 2)) == nullptr);
  auto twice_old = delta;  // rows 0 and 1: updated rows of the base
  std::memcpy(twice_old.data() + at + row_bytes, twice_old.data() + at, 8);
  reseal(twice_old);
  CHECK(delta_code(base, twice_old, c) == table_errc::duplicate_key);
  auto twice_new = delta;  // the last two: rows the delta creates
  std::memcpy(twice_new.data() + at + (changed - 1) * row_bytes, twice_new.data() + at + (changed - 2) * row_bytes, 8);
  reseal(twice_new);
  CHECK(delta_code(base, twice_new, c) == table_errc::duplicate_key);
  auto removal = delta;
  const uint64_t one = 1;
  std::memcpy(removal.data() + 96, &one, 8);
  reseal(removal);
  CHECK(delta_code(base, removal, c) == table_errc::malformed);
  CHECK(delta_code(base, delta, c) == table_errc::ok);
}

TEST_CASE("5000 seeded mutations of table snapshots in either order are decoded or refused, never a broken table") {
  // Bits flipped, bytes set, the tail cut, resealed so that most reach the
  // checks behind the CRC; read whole or in parts of 37 bytes (a tensor's
  // chunks). Whatever decodes holds distinct keys and encodes to a snapshot
  // that decodes to the same contents.
  const table_config c = config_of("clicks", dim, adam());
  std::mt19937_64 rng(2026);
  const embedding_table t = trained(c, 1, 3, rng);
  std::vector<std::vector<unsigned char>> seeds = {encode_table(t)};
  table_config bounded = c;
  bounded.capacity_rows = 1000;
  auto b = embedding_table::make(bounded, test_init);
  REQUIRE(b);
  push p = random_push(rng, 40, 5000, dim);
  REQUIRE(!b->apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), 1));
  seeds.push_back(encode_table(*b));
  size_t decoded = 0;
  for (int i = 0; i < 5000; ++i) {
    const size_t which = rng() % seeds.size();
    const table_config& config = which == 0 ? c : bounded;
    auto input = seeds[which];
    for (int m = 0, n = 1 + static_cast<int>(rng() % 3); m < n && input.size() > 8; ++m) {
      auto at = rng() % input.size();
      switch (rng() % 3) {
        case 0: input[at] ^= static_cast<unsigned char>(1u << (rng() % 8)); break;
        case 1: input[at] = static_cast<unsigned char>(rng()); break;
        default: input.resize(std::max<size_t>(at, 8)); break;
      }
    }
    if (rng() % 8 != 0 && input.size() >= 4)
      reseal(input);
    std::vector<byte_view> parts;
    for (size_t at = 0; at < input.size(); at += 37) parts.push_back({input.data() + at, std::min<size_t>(37, input.size() - at)});
    auto whole = decode_table(input.data(), input.size(), config, test_init);
    auto chunked = decode_table(parts, config, test_init);
    REQUIRE(static_cast<bool>(whole) == static_cast<bool>(chunked));
    if (!whole) {
      CHECK(whole.error().code == chunked.error().code);
      continue;
    }
    ++decoded;
    auto keys = whole->keys_in_order();
    CHECK(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
    const auto again = encode_table(*whole);
    auto back = decode_table(again.data(), again.size(), config, test_init);
    REQUIRE(back);
    CHECK(content_sha256(*back) == content_sha256(*whole));
    CHECK(content_sha256(*chunked) == content_sha256(*whole));
  }
  CHECK(decoded > 0);  // some mutations leave a valid table (a value changed and resealed)
}
