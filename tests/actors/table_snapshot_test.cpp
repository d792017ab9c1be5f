// Table snapshots and content hashes (actors/core/table_snapshot.hpp): a
// restored table continues bit-identically, every damage and every mismatch
// with the restoring shard's table is refused by name, and the hash depends on
// contents only.
#include "actors/core/table_snapshot.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "storage/crc32c.hpp"
#include "table_fixture.hpp"

using namespace keel;
using namespace keel::table_test;

namespace {

// A table with every feature on: Adam state, a capacity that evicts, an
// admission filter, and 30 steps of pushes.
table_config full_config() {
  table_config c = config_of("clicks", 4, adam());
  c.capacity_rows = 300;
  c.admission.min_pushes = 2;
  c.admission.sketch_width = 1024;
  return c;
}

embedding_table trained(const table_config& c, uint64_t steps, std::mt19937_64& rng) {
  auto t = embedding_table::make(c, test_init);
  REQUIRE(t);
  for (uint64_t s = 1; s <= steps; ++s) {
    push p = random_push(rng, 50, 600, c.dim);
    REQUIRE(!t->apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), s));
  }
  return std::move(*t);
}

// Recomputes the trailing CRC32C, so a test can change a field and reach
// the check behind the CRC.
void reseal(std::vector<unsigned char>& b) {
  uint32_t crc = crc32c(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
}

table_errc decode_code(const std::vector<unsigned char>& b, const table_config& c) {
  auto t = decode_table(b.data(), b.size(), c, test_init);
  return t ? table_errc::ok : t.error().code;
}

// Where the rows start in a snapshot of `c` (header, name, bitmap).
size_t rows_offset(const table_config& c) {
  return table_snapshot_header_bytes + c.name.size() + c.slots.words().size() * 8;
}

}  // namespace

TEST_CASE("a restored table holds the same bytes and continues bit-identically") {
  const table_config c = full_config();
  std::mt19937_64 rng(21);
  embedding_table original = trained(c, 30, rng);
  REQUIRE(original.counters().evictions > 0);
  REQUIRE(original.counters().admissions_refused > 0);
  const auto bytes = encode_table(original);
  auto restored = decode_table(bytes.data(), bytes.size(), c, test_init);
  REQUIRE(restored);
  CHECK(encode_table(*restored) == bytes);
  CHECK(content_sha256(*restored) == content_sha256(original));
  CHECK(restored->keys_in_eviction_order() == original.keys_in_eviction_order());
  auto a = original.counters(), b = restored->counters();
  CHECK(a.rows == b.rows);
  CHECK(a.evictions == b.evictions);
  CHECK(a.admissions_refused == b.admissions_refused);

  // The same later pushes give the same table: values, state, recency, sketch.
  std::mt19937_64 later(99);
  for (uint64_t s = 31; s <= 45; ++s) {
    push p = random_push(later, 50, 600, c.dim);
    REQUIRE(!original.apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), s));
    REQUIRE(!restored->apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), s));
  }
  CHECK(encode_table(*restored) == encode_table(original));
}

TEST_CASE("a key pulled before a snapshot reads the same after its restore") {
  const table_config c = full_config();
  std::mt19937_64 rng(4);
  embedding_table original = trained(c, 10, rng);
  std::vector<uint64_t> keys = {123456789, 5, 600'000};  // never pushed, and maybe some rows
  std::vector<float> before(keys.size() * c.dim), after(before.size());
  REQUIRE(!original.pull(keys.data(), keys.size(), before.data(), before.size()));
  const auto bytes = encode_table(original);
  auto restored = decode_table(bytes.data(), bytes.size(), c, test_init);
  REQUIRE(restored);
  REQUIRE(!restored->pull(keys.data(), keys.size(), after.data(), after.size()));
  CHECK(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0);
  CHECK(encode_table(original) == bytes);  // the pull changed nothing
}

TEST_CASE("a damaged table snapshot is refused and the damage named") {
  const table_config c = full_config();
  std::mt19937_64 rng(8);
  const auto good = encode_table(trained(c, 10, rng));
  REQUIRE(decode_code(good, c) == table_errc::ok);

  auto shorter = good;
  shorter.resize(40);
  CHECK(decode_code(shorter, c) == table_errc::malformed);
  shorter = good;
  shorter.pop_back();
  CHECK(decode_code(shorter, c) == table_errc::count_mismatch);
  auto flipped = good;
  flipped[rows_offset(c) + 20] ^= 0x10;
  CHECK(decode_code(flipped, c) == table_errc::crc_mismatch);
  auto magic = good;
  magic[0] ^= 1;
  CHECK(decode_code(magic, c) == table_errc::malformed);
  auto version = good;
  version[8] = 9;
  reseal(version);
  CHECK(decode_code(version, c) == table_errc::malformed);
  auto rows = good;
  rows[24] += 1;  // one row more than the bytes hold
  reseal(rows);
  CHECK(decode_code(rows, c) == table_errc::count_mismatch);
}

TEST_CASE("a snapshot of another table layout is refused and the difference named") {
  const table_config c = full_config();
  std::mt19937_64 rng(8);
  const auto good = encode_table(trained(c, 10, rng));

  table_config other = c;
  other.name = "views";
  CHECK(decode_code(good, other) == table_errc::name_mismatch);
  other = c;
  other.dim = 8;
  CHECK(decode_code(good, other) == table_errc::dim_mismatch);
  other = c;
  other.optimizer.kind = optimizer_kind::adagrad;
  CHECK(decode_code(good, other) == table_errc::optimizer_mismatch);
  other = c;
  other.slots = slot_set::all(1024);
  CHECK(decode_code(good, other) == table_errc::slots_mismatch);
  other = c;
  other.slots = slot_map::contiguous(default_slot_count, 2)->slots_of(0);
  CHECK(decode_code(good, other) == table_errc::slots_mismatch);
  other = c;
  other.capacity_rows = 1000;
  CHECK(decode_code(good, other) == table_errc::options_mismatch);
  other = c;
  other.admission.sketch_seed = 1;
  CHECK(decode_code(good, other) == table_errc::options_mismatch);
  auto dtype = good;
  dtype[10] = 3;
  reseal(dtype);
  CHECK(decode_code(dtype, c) == table_errc::dtype_mismatch);
}

TEST_CASE("a snapshot row outside the shard's slots, repeated, or not finite is refused by name") {
  // A shard owning half the slots, whose snapshot then claims all of them.
  table_config half = full_config();
  half.slots = slot_map::contiguous(default_slot_count, 2)->slots_of(0);
  const size_t row_bytes = 8 + 4 + 4 * 4 * 3;  // key, rank, 4 values + 8 Adam state
  auto t = embedding_table::make(half, test_init);
  REQUIRE(t);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; keys.size() < 2; ++k)
    if (half.slots.contains_key(k))
      keys.push_back(k);
  std::vector<float> g(8, 0.5f);
  REQUIRE(!t->apply(keys.data(), 2, g.data(), 8, 1));
  REQUIRE(!t->apply(keys.data(), 2, g.data(), 8, 2));  // admitted at the second push
  REQUIRE(t->rows() == 2);
  const auto good = encode_table(*t);
  const size_t rows_at = rows_offset(half);

  auto outside = good;
  uint64_t foreign = 0;
  while (half.slots.contains_key(foreign) || foreign <= keys[0]) ++foreign;
  if (foreign > keys[1]) {
    std::memcpy(outside.data() + rows_at + row_bytes, &foreign, 8);  // keep the keys ascending
  } else {
    std::memcpy(outside.data() + rows_at, &foreign, 8);
  }
  reseal(outside);
  CHECK(decode_code(outside, half) == table_errc::key_outside_slots);

  auto repeated = good;
  std::memcpy(repeated.data() + rows_at + row_bytes, &keys[0], 8);
  reseal(repeated);
  CHECK(decode_code(repeated, half) == table_errc::duplicate_key);

  auto nan = good;
  float bad = std::nanf("");
  std::memcpy(nan.data() + rows_at + 12, &bad, 4);
  reseal(nan);
  CHECK(decode_code(nan, half) == table_errc::non_finite);
}

TEST_CASE("the content hash depends on the keys and values only, and combining keeps order") {
  table_config c = config_of("h", 3);
  auto a = embedding_table::make(c, test_init);
  auto b = embedding_table::make(c, test_init);
  REQUIRE(a);
  REQUIRE(b);
  std::mt19937_64 rng(2), shuffler(3);
  for (uint64_t s = 1; s <= 5; ++s) {
    push p = random_push(rng, 30, 100, 3);
    REQUIRE(!a->apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), s));
    push q = shuffled(p, shuffler, 3);
    REQUIRE(!b->apply(q.keys.data(), q.keys.size(), q.grads.data(), q.grads.size(), s));
  }
  CHECK(content_sha256(*a) == content_sha256(*b));
  CHECK(to_hex(content_sha256(*a)).size() == 64);
  uint64_t key = a->keys_in_order().front();
  std::vector<float> tiny = {0.0f, 0.0f, 0.25f};
  REQUIRE(!b->apply(&key, 1, tiny.data(), 3, 6));
  CHECK(content_sha256(*a) != content_sha256(*b));
  auto ha = content_sha256(*a), hb = content_sha256(*b);
  CHECK(combine_digests({ha, hb}) != combine_digests({hb, ha}));
  CHECK(combine_digests({ha, hb}) == combine_digests({ha, hb}));
}

TEST_CASE("a table encoded into spans of any sizes holds the bytes encode_table gives, and says their CRC") {
  const table_config c = full_config();
  std::mt19937_64 rng(5);
  embedding_table t = trained(c, 20, rng);
  const auto whole = encode_table(t);
  REQUIRE(encoded_table_bytes(t) == whole.size());
  // Spans that cut the header, a key, a row and the trailing CRC, and an empty one.
  std::vector<unsigned char> into(whole.size(), 0xee);
  std::vector<byte_span> spans;
  size_t at = 0;
  for (size_t len : {size_t{1}, size_t{7}, size_t{0}, size_t{90}, size_t{333}, size_t{4097}}) {
    spans.push_back({into.data() + at, len});
    at += len;
  }
  REQUIRE(at + 2 < whole.size());
  spans.push_back({into.data() + at, whole.size() - at - 2});
  spans.push_back({into.data() + whole.size() - 2, 2});
  CHECK(encode_table_into(t, spans) == crc32c(whole.data(), whole.size()));
  CHECK(into == whole);
  // Spans of the wrong total are refused before anything is written.
  std::vector<unsigned char> small(whole.size() - 1, 0xee);
  CHECK_THROWS_AS(encode_table_into(t, {{small.data(), small.size()}}), std::invalid_argument);
  CHECK(small == std::vector<unsigned char>(whole.size() - 1, 0xee));
}

TEST_CASE("a bounded table's rows are stored in key order whether their keys spread over 64 bits or bunch together") {
  table_config c = config_of("spread", 2, adam());
  c.capacity_rows = 30000;  // version 1 (without a capacity, version 3 keeps the table's order)
  auto t = embedding_table::make(c, test_init);
  REQUIRE(t);
  // Hashed IDs over the whole range, the extremes, and a bunch of neighbours
  // that share one bucket of the first sorting pass.
  std::mt19937_64 rng(9);
  std::vector<uint64_t> keys = {0, 1, ~uint64_t{0}, ~uint64_t{0} - 1, uint64_t{1} << 63};
  for (int i = 0; i < 20000; ++i) keys.push_back(rng());
  for (uint64_t k = 0; k < 3000; ++k) keys.push_back((uint64_t{7} << 40) + k);
  std::vector<float> grads(keys.size() * c.dim, 0.5f);
  REQUIRE(!t->apply(keys.data(), keys.size(), grads.data(), grads.size(), 1));
  const auto bytes = encode_table(*t);
  auto restored = decode_table(bytes.data(), bytes.size(), c, test_init);  // refuses keys out of order
  REQUIRE_MESSAGE(restored, describe(restored.error()));
  CHECK(restored->keys_in_order() == t->keys_in_order());
  const size_t row_bytes = 8 + 4 + c.dim * 3 * 4;  // key, recency rank, values and Adam's state
  std::vector<uint64_t> stored;
  for (size_t at = rows_offset(c); stored.size() < keys.size(); at += row_bytes) {
    uint64_t k;
    std::memcpy(&k, bytes.data() + at, 8);
    stored.push_back(k);
  }
  CHECK(stored == t->keys_in_order());
}
