#pragma once
// An embedding_table holds the rows of one embedding table that one shard
// owns: rows of `dim` float32 values keyed by any 64-bit key whose hash slot
// (actors/core/hash_slots.hpp) the shard owns, each with its optimizer state
// beside it. A plain value: movable and copyable, no actor; the shard that
// owns it serialises access (const members touch nothing mutable, so pulls
// may run side by side while no apply runs). Snapshots and the content hash:
// actors/core/table_snapshot.hpp; summing a BSP step's pushes first:
// actors/core/row_block_sum.hpp.
//
// Rows come into being at their first admitted push, with the value of the
// caller's pure initializer init(key) (the model's (seed, table, key) rule;
// the table invents no values). A pull never creates a row: a key without
// one reads init(key), so a pull changes nothing a snapshot holds, and a
// shard restored from a snapshot (where such a key has no row either)
// answers the same pull with the same values. Pushes are what replay
// re-applies; pulls are not replayed, so they must not change state.
//
// apply() is lazy, as TensorFlow's LazyAdam and PyTorch's SparseAdam are:
// only the rows a push carries are updated, with keel's update rules
// (actors/core/update_rules.hpp, the same float arithmetic as dense
// parameters). Adam's bias correction uses the caller's step `t` (the
// shard's optimizer step count, as for its dense parameters), not a count
// per row: what both of those libraries do.
//
// Storage: an open-addressing index (linear probing, 4 bytes a bucket, load
// at most 3/4) of row numbers, and an arena of fixed-size blocks (about
// 1 MiB) in which a row is [key (8 bytes), with a capacity its recency links
// (8 bytes), with LFU eviction its count tier (4 bytes), d values, d floats
// per optimizer slot]; no allocation per row, no copy when the arena grows.
// bytes() counts all of it. At most 2^32 - 2 rows a table and shard (more
// are refused like a full table's).
//
// Capacity and eviction: with capacity_rows > 0, a push that must create a
// row while the table is full first evicts one, chosen by the eviction
// policy (actors/core/eviction_policy.hpp):
//  - least_recently_updated: the row whose last update is oldest;
//  - least_frequently_updated: the row with the lowest update count (the
//    pushes that updated it since it was created: 1 at its creation, +1 a
//    push, saturating at 2^32 - 1), of those the least recently updated.
// Recency is the order of pushes; within one push, the rows it already had
// count as updated first, in key order, then the rows it created, in key
// order: so the state after a push depends on its set of (key, gradient)
// rows only, never on their order in the push, and BSP runs stay bit-
// identical. A push never evicts one of its own rows (with LFU the victim
// is chosen among the rows the push did not update); when every row of a
// full table is the push's, its new keys are dropped (counted as
// full_refused). Both rules cost O(1) an update and an eviction: LRU keeps
// one list in update order; LFU keeps a list of count tiers in ascending
// count, each holding its rows in update order (a tier is 20 bytes, at most
// one per distinct count).
//
// Admission: with admission.min_pushes = N > 1, a key becomes a row only at
// its N-th push; earlier pushes of it are dropped (counted) and only counted
// in a count-min sketch (actors/core/count_min_sketch.hpp: fixed memory,
// fixed seed, counts never below the truth, so a key may be admitted early
// through a collision, never late). Only pushes count; the sketch is in the
// snapshot. An evicted key's count stays, so it is re-admitted at its next
// push.
//
// Errors (table_error, actors/core/table_error.hpp) refuse the whole request:
// nothing of a refused push is applied.
//
// Changes since a mark: the table remembers which rows a push created or
// updated, and which keys it evicted, since the last clear_changes() (a
// bit per row and a list of evicted keys): what an incremental snapshot
// (actors/core/table_delta.hpp) writes. With a capacity the changed rows are
// exactly the most recently updated ones: with LRU the tail of the recency
// order, with LFU the tail of each count tier.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/core/count_min_sketch.hpp"
#include "actors/core/eviction_policy.hpp"
#include "actors/core/hash_slots.hpp"
#include "actors/core/optimizer_config.hpp"
#include "actors/core/table_error.hpp"

namespace keel {

// Writes the initial value of `key`'s row, `dim` floats, to `out`. Must be a
// pure function of the key (and of what the caller bound into it: the seed
// and the table), and must not throw.
using row_initializer = std::function<void(uint64_t key, float* out, uint32_t dim)>;

// The count-min sketch behind admission, when min_pushes > 1.
struct admission_filter {
  uint32_t min_pushes = 0;                       // 0 or 1: every key is admitted at its first push
  uint32_t sketch_depth = 4;                     // 1..16 rows of counters
  uint32_t sketch_width = 1u << 16;              // counters a row, a power of two
  uint64_t sketch_seed = 0x6b65656c2d61646dULL;  // "keel-adm"
};

struct table_config {
  std::string name;
  uint32_t dim = 1;
  optimizer_config optimizer;  // kind sets the state layout; rates are used by apply
  slot_set slots = slot_set::all(default_slot_count);  // the slots this shard owns
  uint64_t capacity_rows = 0;  // 0: unbounded; else evict by `eviction`
  eviction_policy eviction = eviction_policy::least_recently_updated;  // with a capacity
  admission_filter admission;
};

struct table_counters {
  uint64_t rows = 0;
  uint64_t evictions = 0;           // rows evicted to make room
  uint64_t admissions_refused = 0;  // pushed rows dropped by the admission filter
  uint64_t full_refused = 0;        // pushed rows dropped: table full of the push's own rows
  uint64_t bytes = 0;               // memory held, as bytes() says
};

class embedding_table {
 public:
  // An empty table. Fails with invalid_config for an empty name, dim 0, a
  // dim whose row would not fit the arena, a null initializer, or an
  // admission filter out of range (min_pushes > 65535, width not a power of
  // two, depth not in 1..16).
  static table_result<embedding_table> make(table_config cfg, row_initializer init);

  const table_config& config() const { return cfg_; }
  const std::string& name() const { return cfg_.name; }
  uint32_t dim() const { return cfg_.dim; }
  // Optimizer state floats a row keeps per value (0 SGD, 1 momentum/AdaGrad, 2 Adam).
  uint32_t state_slots() const { return state_slots_; }

  // Whether a request for table `name` with rows of `dim` is for this table:
  // name_mismatch or dim_mismatch naming both, else no error.
  table_error check_request(const std::string& name, uint32_t dim) const;

  // Writes the rows of the `n` keys at `keys`, in that order, to `out`
  // (`out_floats` must be n * dim): a key's row values, or init(key) for a
  // key without a row. Keys may repeat. Errors: block_shape,
  // key_outside_slots (out is then partly written). Changes nothing.
  table_error pull(const uint64_t* keys, size_t n, float* out, size_t out_floats) const;

  // Applies the gradient rows `grads` (n x dim, row i for keys[i]) at
  // optimizer step `t` (>= 1), creating rows as admission and capacity
  // allow. Errors, checked before anything is applied: block_shape,
  // non_finite (naming the key and column), key_outside_slots,
  // duplicate_key.
  table_error apply(const uint64_t* keys, size_t n, const float* grads, size_t grad_floats,
                    uint64_t t);

  // The values of `key`'s row (dim floats, followed by state_slots() * dim
  // state floats, slot by slot), or null if it has no row. Valid until the
  // next apply.
  const float* find_row(uint64_t key) const;
  uint64_t rows() const { return rows_; }
  table_counters counters() const;
  // Bytes held: arena blocks, index, recency links, LFU count tiers, sketch, scratch.
  size_t bytes() const;
  // The keys of all rows, ascending.
  std::vector<uint64_t> keys_in_order() const;
  // The keys in eviction order, the next victim first (empty without
  // capacity): with LRU from least to most recently updated; with LFU by
  // update count, then from least to most recently updated.
  std::vector<uint64_t> keys_in_eviction_order() const;
  // The pushes that updated `key`'s row (LFU only, else 0; 0 without a row).
  uint32_t update_count(uint64_t key) const;

  // Rows created or updated since the last clear_changes() (or since the
  // table was made or decoded), and keys evicted since then (in eviction
  // order; an evicted key may have a row again).
  uint64_t changed_rows() const { return changed_; }
  const std::vector<uint64_t>& evicted_keys() const { return evicted_; }
  // False once more keys were evicted since the mark than the table holds
  // rows (at least 65536): the list is then dropped (its memory is bounded)
  // and only a full snapshot captures the table.
  bool changes_complete() const { return !changes_lost_; }
  // Marks every row unchanged: the caller took a snapshot of the table.
  void clear_changes();

 private:
  friend class table_codec;  // actors/core/table_snapshot.cpp
  static constexpr uint32_t no_row = 0xffffffffu;
  static constexpr uint32_t max_rows = 0xfffffffeu;  // no_row marks an empty bucket

  embedding_table(table_config cfg, row_initializer init);

  // Arena: row r lives in block r >> block_shift_ at (r & block_mask_) * stride_.
  float* row_at(uint32_t r) {
    return blocks_[r >> block_shift_].data() + (r & block_mask_) * stride_;
  }
  const float* row_at(uint32_t r) const {
    return blocks_[r >> block_shift_].data() + (r & block_mask_) * stride_;
  }
  uint64_t key_at(uint32_t r) const;
  uint32_t find(uint64_t key) const;
  // Prefetches the index buckets, then the rows, of n <= prefetch_chunk
  // keys, so that their cache misses overlap instead of following each other.
  static constexpr size_t prefetch_chunk = 16;
  void prefetch(const uint64_t* keys, size_t n) const;
  size_t bucket_of(uint64_t key) const;
  void index_insert(uint64_t key, uint32_t r);
  void index_erase(uint64_t key);
  void grow_index();
  // Sizes the index for `rows` rows at once (a restore knows how many).
  void reserve_rows(uint64_t rows);
  uint32_t append_row(uint64_t key);
  void init_row(uint32_t r, uint64_t key);

  table_error check_push(const uint64_t* keys, size_t n, const float* grads, size_t grad_floats);
  table_error check_duplicates(const uint64_t* keys, size_t n);
  bool admit(uint64_t key);
  void apply_unbounded(const uint64_t* keys, size_t n, const float* grads, uint64_t t);
  void apply_bounded(const uint64_t* keys, size_t n, const float* grads, uint64_t t);
  uint32_t make_room(uint64_t key, size_t rows_of_this_push, const uint64_t* keys);
  uint32_t evict(uint32_t victim, uint64_t key);
  void mark_changed(uint32_t r) {
    uint64_t& w = changed_bits_[r >> 6];
    const uint64_t bit = uint64_t{1} << (r & 63);
    changed_ += (w & bit) == 0;
    w |= bit;
  }
  bool is_changed(uint32_t r) const { return (changed_bits_[r >> 6] >> (r & 63)) & 1; }

  // Recency list (with a capacity): prev/next row numbers in the row's
  // header; with LRU one list, head_ the least recently updated, with LFU a
  // list a count tier (below).
  uint32_t link(uint32_t r, int which) const;
  void set_link(uint32_t r, int which, uint32_t to);
  void link_tail(uint32_t r);
  void unlink(uint32_t r);

  // LFU count tiers (with a capacity and least_frequently_updated): the
  // tiers in ascending count from first_tier_, each with its rows in update
  // order through the rows' links (head the least recently updated), the
  // row's tier number in its header after the links. An empty tier goes to
  // the free list (through `next`).
  struct count_tier {
    uint32_t count, head, tail, prev, next;
  };
  bool lfu() const {
    return cfg_.capacity_rows > 0 && cfg_.eviction == eviction_policy::least_frequently_updated;
  }
  uint32_t tier_of(uint32_t r) const;
  void tier_append(uint32_t tier, uint32_t r);
  // Takes r out of its tier, dropping the tier when that empties it.
  void tier_remove(uint32_t r);
  // A new tier of `count` after tier `after` (first with no_row).
  uint32_t make_tier(uint32_t count, uint32_t after);
  // One more update of row r: to the tail of the tier of its count + 1.
  void count_update(uint32_t r);
  // Row r at the tail of the tier of `count`, found or made at or after
  // `cursor` (no_row: from the first): rows placed in ascending count, each
  // passing the previous call's cursor, cost O(rows + tiers) in all.
  void place_at_count(uint32_t r, uint32_t count, uint32_t& cursor);
  // Whether `key` is among the keys of the push being applied (seen_).
  bool in_push(uint64_t key, const uint64_t* keys) const;
  // The LFU victim for a push: the head of the first tier, from
  // victim_scan_ on, whose head the push did not update (no_row if none).
  uint32_t lfu_victim(const uint64_t* keys);

  table_config cfg_;
  row_initializer init_;
  uint32_t state_slots_ = 0;
  size_t header_ = 2;  // floats before a row's values: key, links with a capacity, tier with LFU
  size_t stride_ = 0;  // floats a row: header_ + dim * (1 + state_slots)
  uint32_t block_shift_ = 0;
  uint32_t block_mask_ = 0;
  // A block's floats are left as the allocator gives them (no zero fill):
  // each row is written whole when it is created (key, links, values,
  // state), so the pages of a block's unused tail are never touched and do
  // not count in the process's resident memory (a shard of ctr-fm's 26
  // tables: about 13 MB). Nothing reads a tail (a copied table copies it
  // as it is).
  template <class T>
  struct uninitialised_allocator : std::allocator<T> {
    template <class U>
    struct rebind {
      using other = uninitialised_allocator<U>;
    };
    uninitialised_allocator() = default;
    template <class U>
    uninitialised_allocator(const uninitialised_allocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept {
      ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... A>
    void construct(U* p, A&&... a) {
      ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
  };
  using block = std::vector<float, uninitialised_allocator<float>>;
  std::vector<block> blocks_;
  uint32_t rows_ = 0;
  std::vector<uint32_t> index_;  // bucket -> row, no_row when empty
  uint32_t index_bits_ = 0;
  uint32_t head_ = no_row, tail_ = no_row;
  std::vector<count_tier> tiers_;
  uint32_t first_tier_ = no_row, free_tier_ = no_row;
  uint32_t victim_scan_ = no_row;  // during a push's new rows: tiers before it are all the push's
  count_min_sketch sketch_;
  table_counters stats_;
  // Changes since clear_changes(): a bit per row number (grown with the
  // rows), their count, and the keys evicted.
  std::vector<uint64_t> changed_bits_;
  uint64_t changed_ = 0;
  std::vector<uint64_t> evicted_;
  bool changes_lost_ = false;
  // Scratch reused by apply (no allocation per push once grown).
  std::vector<uint32_t> seen_;
  std::vector<uint32_t> order_;
  std::vector<uint32_t> pending_;
};

}  // namespace keel
