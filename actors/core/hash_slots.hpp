#pragma once
// How an embedding table's 64-bit keys are spread over parameter shards:
// hash slots, as Redis Cluster does. Every key falls in one of a fixed number
// of slots (slot = mix64(key) mod slot_count, the count part of a table's
// configuration and of its snapshots), and a slot_map says which shard owns
// each slot. Keys never move between slots; growing the cluster moves whole
// slots, so only the keys of the slots that move change shard, and the state
// that moves is a list of slots, not a list of keys.
//
// The default map gives shard s the contiguous range [s*S/n, (s+1)*S/n) of
// the S slots. with_shard_added() then takes from the existing shards only
// the slots the new shard needs to be balanced (about S/(n+1), from each
// shard its highest), so about 1/(n+1) of the keys move, all to the new
// shard, the least any balanced scheme can move (tests/actors/
// hash_slots_test.cpp measures it). Re-splitting S into n+1 contiguous ranges
// would move about half of them instead.
//
// Plain values: copyable, immutable once built (slot_set::add aside), no
// allocation per key. split_by_shard groups a batch's keys by shard for a
// worker building one push per shard, reusing its buffers across batches.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "actors/core/table_error.hpp"

namespace keel {

// The finaliser of splitmix64 (Steele, Lea & Flood, "Fast splittable
// pseudorandom number generators", 2014; the constants of Vigna's
// splitmix64.c): a bijection on 64-bit values in which every input bit
// changes each output bit with probability about 1/2, so sequential or
// clustered feature IDs spread evenly over slots. Stable: part of the
// snapshot format, never to change.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// 4096 slots: fine enough to balance up to a few hundred shards within a
// few percent, small enough that a shard's set of slots is a 512-byte bitmap.
constexpr uint32_t default_slot_count = 4096;

// The slot of `key` among `slot_count` (> 0) slots.
inline uint32_t slot_of(uint64_t key, uint32_t slot_count) {
  return static_cast<uint32_t>(mix64(key) % slot_count);
}

// The set of slots one shard owns, as a bitmap over all slots of the table.
class slot_set {
 public:
  // A set over `slot_count` slots holding none of them.
  explicit slot_set(uint32_t slot_count = default_slot_count);
  // Every slot of `slot_count`.
  static slot_set all(uint32_t slot_count);
  // The set with exactly the bits of `words` (64 slots a word, slot i at bit
  // i % 64 of word i / 64); fails (slots_mismatch) when the number of words
  // is not ceil(slot_count / 64) or a bit past the last slot is set.
  static table_result<slot_set> from_words(uint32_t slot_count, std::vector<uint64_t> words);

  uint32_t slot_count() const { return slot_count_; }
  bool contains_slot(uint32_t slot) const {
    return slot < slot_count_ && (words_[slot / 64] >> (slot % 64) & 1) != 0;
  }
  bool contains_key(uint64_t key) const {
    uint64_t h = mix64(key);
    // The same as slot_of, without a division when the count is a power of two.
    return contains_slot(static_cast<uint32_t>(pow2_ ? h & (slot_count_ - 1) : h % slot_count_));
  }
  // Adds `slot` (< slot_count()).
  void add(uint32_t slot);
  // How many slots the set holds.
  uint32_t size() const;
  const std::vector<uint64_t>& words() const { return words_; }
  bool operator==(const slot_set& o) const {
    return slot_count_ == o.slot_count_ && words_ == o.words_;
  }
  bool operator!=(const slot_set& o) const { return !(*this == o); }

 private:
  uint32_t slot_count_;
  bool pow2_;
  std::vector<uint64_t> words_;
};

// Which shard owns each slot of a table.
class slot_map {
 public:
  // Shard s owns the contiguous slots [s*S/n, (s+1)*S/n). Fails
  // (invalid_config) unless 0 < shards <= slot_count.
  static table_result<slot_map> contiguous(uint32_t slot_count, uint32_t shards);
  // The map given by each slot's owner; fails (invalid_config) when an owner
  // is not below `shards`, a shard owns no slot, or there are no slots.
  static table_result<slot_map> from_owners(std::vector<uint32_t> owner_of_slot, uint32_t shards);

  // The map with shard shard_count() added. The new shard takes one slot at
  // a time from the shard owning the most (the lowest-numbered among equals),
  // that shard's highest-numbered slot, until it owns floor(S/(n+1)). No
  // other slot changes owner. Fails (invalid_config) when every shard would
  // be left without a slot (n + 1 > S).
  table_result<slot_map> with_shard_added() const;

  uint32_t slot_count() const { return static_cast<uint32_t>(owner_.size()); }
  uint32_t shard_count() const { return shards_; }
  uint32_t shard_of_slot(uint32_t slot) const { return owner_[slot]; }
  uint32_t shard_of(uint64_t key) const { return owner_[slot_of(key, slot_count())]; }
  // The slots `shard` owns (what its tables are configured with).
  slot_set slots_of(uint32_t shard) const;
  const std::vector<uint32_t>& owners() const { return owner_; }

 private:
  slot_map(std::vector<uint32_t> owner, uint32_t shards)
      : owner_(std::move(owner)), shards_(shards) {}
  std::vector<uint32_t> owner_;
  uint32_t shards_;
};

// A batch's keys grouped by shard. After split_by_shard, shard s's keys are
// keys[begin[s] .. begin[s+1]) and they sat at positions position[begin[s]
// .. begin[s+1]) of the batch, in the batch's order (a stable counting sort,
// so a worker can gather the matching gradient rows in the same order).
// Keep one and reuse it: a split only resizes these vectors, so once they
// have grown to a batch's size no further batch allocates.
struct shard_split {
  std::vector<uint64_t> keys;      // the batch's keys, grouped by shard
  std::vector<size_t> position;    // where each of `keys` sat in the batch
  std::vector<size_t> begin;       // shard_count + 1 offsets into keys/position
  std::vector<uint32_t> shard_of;  // scratch: the shard of each batch key, in batch order

  size_t count(uint32_t shard) const { return begin[shard + 1] - begin[shard]; }
  const uint64_t* keys_of(uint32_t shard) const { return keys.data() + begin[shard]; }
  const size_t* positions_of(uint32_t shard) const { return position.data() + begin[shard]; }
};

// Groups the `n` keys at `keys` by the shard `map` gives them, into `out`.
void split_by_shard(const slot_map& map, const uint64_t* keys, size_t n, shard_split& out);

}  // namespace keel
