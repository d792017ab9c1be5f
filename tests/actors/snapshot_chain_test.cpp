// snapshot_chain (actors/core/snapshot_chain.hpp): when a shard's next
// snapshot is a base or a delta, and which chain each written file extends,
// through failed writes, retries and restores.
#include "actors/core/snapshot_chain.hpp"

#include <doctest/doctest.h>

#include "messages/errors.hpp"

using namespace keel;

namespace {

manifest_entry entry(uint64_t id, uint64_t bytes) {
  return {0, "ckpt-" + std::to_string(id) + ".snap", bytes, static_cast<uint32_t>(id), 0, 0, {}};
}

// Takes snapshot `id` as the chain says (estimate `estimate`, `bytes` big);
// returns whether it is a delta.
bool take(snapshot_chain& c, uint64_t id, uint64_t bytes, uint64_t estimate = 10) {
  auto parent = c.next(estimate, true);
  c.taken(id, "ckpt-" + std::to_string(id) + ".snap", bytes, parent);
  return parent.has_value();
}

std::vector<uint64_t> checkpoints(const std::vector<chain_link>& links) {
  std::vector<uint64_t> out;
  for (auto& l : links) out.push_back(l.checkpoint);
  return out;
}

}  // namespace

TEST_CASE("a chain grows by deltas up to full_every files, then starts again with a base") {
  snapshot_chain c({3, 1.0});
  CHECK_FALSE(take(c, 1, 1000));  // nothing to extend: a base
  CHECK(c.written(1, entry(1, 1000))->empty());
  CHECK(take(c, 2, 100));
  auto e2 = c.written(2, entry(2, 100));
  REQUIRE(e2);
  CHECK(checkpoints(*e2) == std::vector<uint64_t>{1});
  CHECK(take(c, 3, 100));
  CHECK(checkpoints(*c.written(3, entry(3, 100))) == std::vector<uint64_t>{1, 2});
  CHECK(c.length() == 3);
  CHECK_FALSE(take(c, 4, 1000));  // three files: the next is a base
  CHECK(c.written(4, entry(4, 1000))->empty());
  CHECK(c.next(10, false) == std::nullopt);  // a table dropped its changes
  snapshot_chain off({1, 1.0});
  CHECK_FALSE(take(off, 1, 1000));
  REQUIRE(off.written(1, entry(1, 1000)));
  CHECK_FALSE(take(off, 2, 1000));
}

TEST_CASE("a chain whose deltas would pass delta_fraction of its base starts again with a base") {
  snapshot_chain c({100, 0.25});
  CHECK_FALSE(take(c, 1, 1000));
  CHECK(take(c, 2, 200, 200));
  auto parent = c.next(60, true);  // 200 + 60 > 250
  CHECK_FALSE(parent.has_value());
  parent = c.next(40, true);
  REQUIRE(parent);
  CHECK(parent->checkpoint == 2);
  CHECK(parent->file == "ckpt-2.snap");
  CHECK(parent->base_checkpoint == 1);
}

TEST_CASE("a delta whose parent's write failed is lost, and the next snapshot is a base") {
  snapshot_chain c({8, 1.0});
  take(c, 1, 1000);
  REQUIRE(c.written(1, entry(1, 1000)));
  CHECK(take(c, 2, 100));
  CHECK(take(c, 3, 100));  // taken while 2 is being written
  c.failed(2);
  auto lost = c.written(3, entry(3, 100));
  REQUIRE_FALSE(lost);
  CHECK(is(lost.error(), errc::damaged_snapshot));
  CHECK(describe(lost.error()).find("a delta on checkpoint 2, whose file was not written") != std::string::npos);
  CHECK_FALSE(take(c, 4, 1000));
}

TEST_CASE("a failed write written again extends its chain, and so does a restored one") {
  snapshot_chain c({8, 1.0});
  take(c, 1, 1000);
  REQUIRE(c.written(1, entry(1, 1000)));
  CHECK(take(c, 2, 100));
  c.failed(2);
  CHECK(c.next(10, true) == std::nullopt);  // the tip failed: a base, unless it is written again first
  auto again = c.written(2, entry(2, 100));
  REQUIRE(again);
  CHECK(checkpoints(*again) == std::vector<uint64_t>{1});
  CHECK(take(c, 3, 100));
  snapshot_chain r({8, 1.0});
  r.restored({{5, "b", 1000, 1}, {6, "d", 100, 2}});
  auto parent = r.next(10, true);
  REQUIRE(parent);
  CHECK(parent->file == "d");
  CHECK(parent->base_checkpoint == 5);
  r.taken(7, "e", 100, parent);
  CHECK(checkpoints(*r.written(7, entry(7, 100))) == std::vector<uint64_t>{5, 6});
}
