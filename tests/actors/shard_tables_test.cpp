// Embedding tables in a parameter shard (actors/core/shard_core.hpp): table
// pushes summed per key in worker order under BSP, deduplicated like dense
// pushes, refused by name when malformed, pulled in the order asked, and
// carried through the shard's snapshot.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <capnp/message.h>
#include <doctest/doctest.h>

#include "actors/core/shard_core.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"
#include "shard_table_fixture.hpp"

using namespace keel;
using Status = schema::PushAck::Status;

using namespace keel::shard_table_test;

TEST_CASE("a BSP shard sums a step's table rows per key in worker order and applies them once") {
  auto s = fresh(table_config_of(consistency_kind::bsp, 2));
  auto k = keys_of_shard(1, 3);
  auto before = pull_rows(s, {k[2], k[1], k[0]});
  // Worker 1's push arrives first; the result must not depend on that.
  CHECK(s.offer(table_push(1, 1, 0, {{0, dim, {k[1], k[2]}, {0.25f, 0.5f, 1.0f, 2.0f}}})).status ==
        Status::ACCEPTED);
  CHECK(pull_rows(s, {k[1]}) == std::vector<float>{before[2 * 1], before[2 * 1 + 1]});
  CHECK(s.offer(table_push(0, 1, 0, {{0, dim, {k[0], k[1]}, {1.0f, 1.0f, 0.5f, 0.125f}}})).steps_applied == 1);
  auto after = pull_rows(s, {k[2], k[1], k[0]});
  // SGD with lr 1: row -= (g_worker0 + g_worker1), rows in the order asked.
  CHECK(after[0] == before[0] - 1.0f);
  CHECK(after[1] == before[1] - 2.0f);
  CHECK(after[2] == before[2] - (0.5f + 0.25f));
  CHECK(after[3] == before[3] - (0.125f + 0.5f));
  CHECK(after[4] == before[4] - 1.0f);
  CHECK(after[5] == before[5] - 1.0f);
  CHECK(s.tables()[0].rows() == 3);
  CHECK(s.version() == 1);
}

TEST_CASE("a table push is one seq: a duplicate is acknowledged again and not applied again") {
  auto s = fresh(table_config_of(consistency_kind::asp, 1));
  auto k = keys_of_shard(1, 1);
  auto before = pull_rows(s, {k[0]});
  CHECK(s.offer(table_push(0, 1, 0, {{0, dim, {k[0]}, {1.0f, 1.0f}}})).status == Status::APPLIED);
  CHECK(s.offer(table_push(0, 1, 0, {{0, dim, {k[0]}, {1.0f, 1.0f}}})).status == Status::DUPLICATE);
  CHECK(pull_rows(s, {k[0]}) == std::vector<float>{before[0] - 1.0f, before[1] - 1.0f});
  CHECK(s.applied(0) == 1);
}

TEST_CASE("a pull never creates a row: an untouched key reads its initial row") {
  auto s = fresh(table_config_of(consistency_kind::asp, 1));
  auto k = keys_of_shard(1, 2);
  std::vector<float> want(4);
  init_rows(0, k[1], want.data(), dim);
  init_rows(0, k[0], want.data() + 2, dim);
  CHECK(pull_rows(s, {k[1], k[0]}) == want);
  CHECK(s.tables()[0].rows() == 0);
}

TEST_CASE("malformed table blocks are refused by name and nothing of them is applied") {
  auto k = keys_of_shard(1, 2);
  SUBCASE("a block that is not n x d") {
    auto d = decode(table_push_msg(0, 1, 0, {{0, dim, {k[0], k[1]}, {1.0f, 2.0f, 3.0f}}}));
    REQUIRE(!d);
    CHECK(describe(d.error()).find("keel.Push.tables[0].rows") != std::string::npos);
    CHECK(describe(d.error()).find("n x d") != std::string::npos);
  }
  SUBCASE("a NaN or an infinity") {
    float nan = std::numeric_limits<float>::quiet_NaN();
    auto d = decode(table_push_msg(0, 1, 0, {{0, dim, {k[0]}, {nan, 1.0f}}}));
    REQUIRE(!d);
    CHECK(describe(d.error()).find("keel.Push.tables[0].rows: contains a NaN") != std::string::npos);
  }
  SUBCASE("keys not strictly increasing") {
    auto d = decode(table_push_msg(0, 1, 0, {{0, dim, {k[1], k[0]}, {1, 1, 1, 1}}}));
    REQUIRE(!d);
    CHECK(describe(d.error()).find("keel.Push.tables[0].keys[1]") != std::string::npos);
  }
  auto s = fresh(table_config_of(consistency_kind::asp, 1));
  SUBCASE("a table the shard does not hold") {
    auto o = s.offer(table_push(0, 1, 0, {{3, dim, {k[0]}, {1, 1}}}));
    CHECK(o.status == Status::REJECTED);
    CHECK(o.reason.find("table 3, but shard 1 holds 1 tables") != std::string::npos);
  }
  SUBCASE("another d") {
    auto o = s.offer(table_push(0, 1, 0, {{0, 1, {k[0]}, {1}}}));
    CHECK(o.status == Status::REJECTED);
    CHECK(o.reason.find("table 'users' has rows of 2") != std::string::npos);
  }
  SUBCASE("a key of another shard's slots") {
    auto other = keys_of_shard(0, 1);
    auto o = s.offer(table_push(0, 1, 0, {{0, dim, {other[0]}, {1, 1}}}));
    CHECK(o.status == Status::REJECTED);
    CHECK(o.reason.find("is not in shard 1's hash slots") != std::string::npos);
  }
  CHECK(s.tables()[0].rows() == 0);
  CHECK(s.applied(0) == 0);
}

TEST_CASE("a shard with tables restored from its snapshot holds the same rows and continues bit-identically") {
  auto cfg = table_config_of(consistency_kind::bsp, 2);
  auto a = fresh(cfg);
  auto k = keys_of_shard(1, 4);
  auto push_step = [&](shard_core& s, uint64_t t) {
    for (uint32_t w = 0; w < 2; ++w)
      s.offer(table_push(w, t + 1, t, {{0, dim, {k[(t + w) % 4]}, {0.1f * static_cast<float>(t + 1), -0.25f}}}));
  };
  for (uint64_t t = 0; t < 3; ++t) push_step(a, t);
  auto snap = snapshot_of(a, 1, 0);
  REQUIRE_MESSAGE(snap, describe(snap.error()));
  auto d = decode(*snap);
  REQUIRE(d);
  CHECK_FALSE(check_shard_snapshot(cfg, d->root()));
  auto b = restore_shard(cfg, d->root(), verify_mode::checksums, init_rows);
  REQUIRE_MESSAGE(b, describe(b.error()));
  CHECK(b->tables()[0].rows() == a.tables()[0].rows());
  for (uint64_t t = 3; t < 6; ++t) {
    push_step(a, t);
    push_step(*b, t);
  }
  std::vector<uint64_t> all = {k[3], k[0], k[2], k[1]};
  auto ra = pull_rows(a, all), rb = pull_rows(*b, all);
  CHECK(std::memcmp(ra.data(), rb.data(), ra.size() * 4) == 0);
  CHECK(a.version() == b->version());
}

TEST_CASE("a snapshot of another table layout, or with a damaged table, is refused by name") {
  auto cfg = table_config_of(consistency_kind::asp, 1);
  auto a = fresh(cfg);
  auto k = keys_of_shard(1, 1);
  a.offer(table_push(0, 1, 0, {{0, dim, {k[0]}, {0.5f, 0.5f}}}));
  auto snap = snapshot_of(a, 1, 0);
  REQUIRE(snap);
  auto d = decode(*snap);
  REQUIRE(d);
  SUBCASE("another d") {
    auto other = cfg;
    other.tables[0].dim = 3;
    auto err = check_shard_snapshot(other, d->root());
    REQUIRE(err);
    CHECK(is(err, errc::shape_mismatch));
    CHECK(describe(err).find("dim_mismatch") != std::string::npos);
  }
  SUBCASE("a table the layout lacks") {
    auto other = cfg;
    other.tables[0].name = "items";
    auto err = check_shard_snapshot(other, d->root());
    REQUIRE(err);
    CHECK(is(err, errc::shape_mismatch));
    CHECK(describe(err).find("tensor 'table.users' is a table this job's layout lacks") != std::string::npos);
  }
  SUBCASE("a damaged table") {
    // The row's first value 0.5f (bits 0x3f000000) flipped in the encoded
    // snapshot: the table's own CRC (or the tensor's) refuses it as damage.
    std::vector<unsigned char> bytes(snap->frame()->encoded_size_bytes());
    snap->frame()->encode_to(bytes.data());
    std::vector<float> row(dim);
    init_rows(0, k[0], row.data(), dim);
    float v = row[0] - 0.5f;
    unsigned char pat[4];
    std::memcpy(pat, &v, 4);
    auto at = std::search(bytes.begin(), bytes.end(), pat, pat + 4);
    REQUIRE(at != bytes.end());
    at[0] ^= 0x01;
    auto f = frame::parse_copy(bytes.data(), bytes.size(), *buffer_pool::process_default());
    REQUIRE(f);
    auto err = check_shard_snapshot(cfg, *f);
    REQUIRE(err);
    CHECK(is(err, errc::damaged_snapshot));
  }
}

TEST_CASE("a shard's next snapshot reuses the memory of one let go, and restores as one made afresh") {
  auto cfg = table_config_of(consistency_kind::bsp, 2);
  auto a = fresh(cfg);
  auto k = keys_of_shard(1, 4);
  for (uint64_t t = 0; t < 2; ++t)
    for (uint32_t w = 0; w < 2; ++w)
      a.offer(table_push(w, t + 1, t, {{0, dim, {k[(t + w) % 4]}, {0.5f, -0.25f}}}));
  auto pool = snapshot_pool();
  const void* first_memory = nullptr;
  {
    auto first = snapshot_of(a, 1, 0, {}, true, pool);
    REQUIRE_MESSAGE(first, describe(first.error()));
    first_memory = first->frame()->segments()[0].begin();
  }  // superseded and let go: its memory goes back to the pool
  auto again = snapshot_of(a, 2, 0, {}, true, pool);
  REQUIRE_MESSAGE(again, describe(again.error()));
  CHECK(pool->stats().reused == 1);
  CHECK(again->frame()->segments()[0].begin() == first_memory);
  auto fresh_snap = snapshot_of(a, 2, 0);
  REQUIRE(fresh_snap);
  auto words = again->frame()->size_words();
  REQUIRE(fresh_snap->frame()->size_words() == words);
  CHECK(std::memcmp(again->frame()->segments()[0].begin(), fresh_snap->frame()->segments()[0].begin(),
                    words * sizeof(capnp::word)) == 0);
  auto d = decode(*again);
  REQUIRE(d);
  auto b = restore_shard(cfg, d->root(), verify_mode::checksums, init_rows);
  REQUIRE_MESSAGE(b, describe(b.error()));
  CHECK(pull_rows(*b, k) == pull_rows(a, k));
}
