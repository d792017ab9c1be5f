// Hash slots (actors/core/hash_slots.hpp): keys spread evenly over slots and
// shards, adding a shard moves about 1/(n+1) of the keys and only to it, and
// a batch splits by shard in its own order without allocating once warm.
#include "actors/core/hash_slots.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

using namespace keel;

namespace {

// Keys as real feature IDs look: runs of sequential IDs and random ones.
std::vector<uint64_t> sample_keys(size_t n) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> keys;
  for (size_t i = 0; i < n / 2; ++i) keys.push_back(i);
  while (keys.size() < n) keys.push_back(rng());
  return keys;
}

double moved_fraction(const slot_map& a, const slot_map& b, const std::vector<uint64_t>& keys) {
  size_t moved = 0;
  for (uint64_t k : keys) moved += a.shard_of(k) != b.shard_of(k);
  return static_cast<double>(moved) / static_cast<double>(keys.size());
}

}  // namespace

TEST_CASE("sequential and random keys spread evenly over the slots and the shards") {
  const auto keys = sample_keys(1'000'000);
  std::vector<size_t> per_slot(default_slot_count, 0);
  for (uint64_t k : keys) ++per_slot[slot_of(k, default_slot_count)];
  const double mean = 1e6 / default_slot_count;  // about 244, standard deviation about 15.6
  auto [lo, hi] = std::minmax_element(per_slot.begin(), per_slot.end());
  CHECK(static_cast<double>(*lo) > mean * 0.6);
  CHECK(static_cast<double>(*hi) < mean * 1.4);

  auto map = slot_map::contiguous(default_slot_count, 7);
  REQUIRE(map);
  std::vector<size_t> per_shard(7, 0);
  for (uint64_t k : keys) ++per_shard[map->shard_of(k)];
  for (size_t s = 0; s < 7; ++s) {
    CAPTURE(s);
    CHECK(static_cast<double>(per_shard[s]) == doctest::Approx(1e6 / 7).epsilon(0.02));
  }
}

TEST_CASE("adding a shard moves about 1/(n+1) of the keys, all of them to the new shard") {
  const auto keys = sample_keys(400'000);
  auto map = slot_map::contiguous(default_slot_count, 1);
  REQUIRE(map);
  slot_map current = *map;
  for (uint32_t n = 1; n <= 8; ++n) {
    CAPTURE(n);
    auto grown = current.with_shard_added();
    REQUIRE(grown);
    double moved = moved_fraction(current, *grown, keys);
    MESSAGE("shards " << n << " -> " << n + 1 << ": moved " << moved
                      << " of the keys (1/(n+1) = " << 1.0 / (n + 1) << ")");
    CHECK(moved == doctest::Approx(1.0 / (n + 1)).epsilon(0.03));
    for (uint64_t k : keys)
      if (current.shard_of(k) != grown->shard_of(k))
        REQUIRE(grown->shard_of(k) == n);
    // Still balanced: every shard owns floor or ceil of S/(n+1) slots.
    uint32_t least = default_slot_count, most = 0;
    for (uint32_t s = 0; s <= n; ++s) {
      least = std::min(least, grown->slots_of(s).size());
      most = std::max(most, grown->slots_of(s).size());
    }
    CHECK(most - least <= 1);
    // Why not re-split into n + 1 contiguous ranges: that moves about half.
    if (n >= 2)
      CHECK(moved_fraction(*slot_map::contiguous(default_slot_count, n),
                           *slot_map::contiguous(default_slot_count, n + 1), keys) > 0.45);
    current = *grown;
  }
}

TEST_CASE("a batch splits by shard in the batch's order, and a warm split allocates nothing") {
  auto map = slot_map::contiguous(default_slot_count, 5);
  REQUIRE(map);
  std::mt19937_64 rng(11);
  std::vector<uint64_t> batch(3000);
  for (auto& k : batch) k = rng() % 100000;  // repeats are fine here: a batch may hold a key twice
  shard_split split;
  split_by_shard(*map, batch.data(), batch.size(), split);
  REQUIRE(split.begin.size() == 6);
  CHECK(split.begin.back() == batch.size());
  for (uint32_t s = 0; s < 5; ++s) {
    std::vector<uint64_t> expected;
    std::vector<size_t> positions;
    for (size_t i = 0; i < batch.size(); ++i)
      if (map->shard_of(batch[i]) == s) {
        expected.push_back(batch[i]);
        positions.push_back(i);
      }
    CAPTURE(s);
    REQUIRE(split.count(s) == expected.size());
    CHECK(std::equal(expected.begin(), expected.end(), split.keys_of(s)));
    CHECK(std::equal(positions.begin(), positions.end(), split.positions_of(s)));
  }
  const uint64_t* keys_buffer = split.keys.data();
  const size_t* position_buffer = split.position.data();
  std::shuffle(batch.begin(), batch.end(), rng);
  split_by_shard(*map, batch.data(), batch.size(), split);
  CHECK(split.keys.data() == keys_buffer);
  CHECK(split.position.data() == position_buffer);
}

TEST_CASE("slot maps and slot sets that cannot exist are refused with a named error") {
  CHECK(slot_map::contiguous(4096, 0).error().code == table_errc::invalid_config);
  CHECK(slot_map::contiguous(4, 5).error().code == table_errc::invalid_config);
  auto bad_owner = slot_map::from_owners({0, 1, 2}, 2);
  REQUIRE(!bad_owner);
  CHECK(bad_owner.error().what.find("slot 2 is owned by shard 2") != std::string::npos);
  CHECK(slot_map::from_owners({0, 0, 0}, 2).error().what.find("shard 1 owns no slot") !=
        std::string::npos);
  CHECK(slot_set::from_words(100, {0}).error().code == table_errc::slots_mismatch);
  CHECK(slot_set::from_words(100, {0, uint64_t{1} << 40}).error().code ==
        table_errc::slots_mismatch);
  auto ok = slot_set::from_words(100, {1, uint64_t{1} << 35});
  REQUIRE(ok);
  CHECK(ok->size() == 2);
  CHECK(ok->contains_slot(99));
}
