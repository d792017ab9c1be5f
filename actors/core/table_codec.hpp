#pragma once
// The internals of embedding tables' binary snapshots, shared by the full
// snapshot (table_snapshot.cpp) and the incremental one (table_delta.cpp):
// the fixed-width header, a writer that spans a message's chunks and keeps
// a CRC32C as it goes, a reader, the shape check against a shard's table,
// and table_codec, the friend of embedding_table that reads and rebuilds
// its arena. Not an interface of its own: table_snapshot.hpp and
// table_delta.hpp are.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "actors/core/embedding_table.hpp"
#include "actors/core/table_delta.hpp"
#include "actors/core/table_snapshot.hpp"
#include "messages/finite.hpp"
#include "storage/crc32c.hpp"

namespace keel {

namespace table_wire {

// The header's fields, in the order of the layout in table_snapshot.hpp.
struct header {
  uint64_t magic = table_snapshot_magic;
  uint16_t version = table_snapshot_version;
  uint8_t dtype = 0;
  uint8_t optimizer = 0;
  uint32_t dim = 0;
  uint32_t state_slots = 0;
  uint32_t slot_count = 0;
  uint64_t rows = 0;
  uint64_t capacity_rows = 0;
  uint32_t min_pushes = 0;
  uint32_t sketch_depth = 0;
  uint32_t sketch_width = 0;
  uint32_t name_bytes = 0;
  uint64_t sketch_seed = 0;
  uint64_t evictions = 0;
  uint64_t admissions_refused = 0;
  uint64_t full_refused = 0;
};

// Writes little-endian fixed-width values (this build's host order; keel
// runs on little-endian machines only, as its wire formats do) into
// consecutive spans, and keeps the CRC32C of what it wrote, extended every
// crc_block bytes while they are still in cache: the bytes are passed over
// once. The spans must hold what is written (checked by the caller; a
// source that runs dry is std::logic_error).
class span_writer {
 public:
  explicit span_writer(span_source& out) : spans_(out) {}

  template <class T>
  void put(T v) {
    if (static_cast<size_t>(end_ - at_) >= sizeof v) {
      std::memcpy(at_, &v, sizeof v);
      at_ += sizeof v;
      if (static_cast<size_t>(at_ - crc_from_) >= crc_block)
        fold();
      return;
    }
    put_bytes(&v, sizeof v);
  }

  void put_bytes(const void* p, size_t n) {
    auto* b = static_cast<const unsigned char*>(p);
    while (n > 0) {
      if (at_ == end_)
        next_span();
      size_t k = std::min(n, static_cast<size_t>(end_ - at_));
      std::memcpy(at_, b, k);
      at_ += k, b += k, n -= k;
      if (static_cast<size_t>(at_ - crc_from_) >= crc_block)
        fold();
    }
  }

  // The CRC32C of every byte written so far.
  uint32_t crc() {
    fold();
    return crc_;
  }

 private:
  static constexpr size_t crc_block = size_t{64} << 10;

  void fold() {
    if (at_ != crc_from_)
      crc_ = crc32c_extend(crc_, crc_from_, static_cast<size_t>(at_ - crc_from_));
    crc_from_ = at_;
  }
  void next_span() {
    fold();
    const byte_span s = spans_.next();
    if (s.size == 0)
      throw std::logic_error("encoding a table: the spans are shorter than its bytes");
    at_ = crc_from_ = s.data;
    end_ = at_ + s.size;
  }

  span_source& spans_;
  unsigned char* at_ = nullptr;
  unsigned char* end_ = nullptr;
  unsigned char* crc_from_ = nullptr;
  uint32_t crc_ = crc32c_empty;
};

// Reads them back; the caller checked the length first.
struct reader {
  const unsigned char* at;
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, at, sizeof v);
    at += sizeof v;
    return v;
  }
};

// Reads bytes in consecutive parts front to back; the caller checked that
// they hold what it reads.
class parts_reader {
 public:
  explicit parts_reader(const std::vector<byte_view>& parts) : parts_(parts) {}
  void copy(void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    while (n > 0) {
      const byte_view& p = parts_[part_];
      const size_t k = std::min(n, p.size - at_);
      std::memcpy(out, p.data + at_, k);
      out += k, n -= k, at_ += k;
      if (at_ == p.size)
        ++part_, at_ = 0;
    }
  }
  template <class T>
  T get() {
    T v;
    copy(&v, sizeof v);
    return v;
  }

 private:
  const std::vector<byte_view>& parts_;
  size_t part_ = 0, at_ = 0;
};

inline void put_header(span_writer& w, const header& h) {
  w.put(h.magic), w.put(h.version), w.put(h.dtype), w.put(h.optimizer);
  w.put(h.dim), w.put(h.state_slots), w.put(h.slot_count), w.put(h.rows);
  w.put(h.capacity_rows), w.put(h.min_pushes), w.put(h.sketch_depth), w.put(h.sketch_width);
  w.put(h.name_bytes), w.put(h.sketch_seed), w.put(h.evictions), w.put(h.admissions_refused);
  w.put(h.full_refused);
}

inline header get_header(reader& r) {
  header h;
  h.magic = r.get<uint64_t>(), h.version = r.get<uint16_t>(), h.dtype = r.get<uint8_t>();
  h.optimizer = r.get<uint8_t>(), h.dim = r.get<uint32_t>(), h.state_slots = r.get<uint32_t>();
  h.slot_count = r.get<uint32_t>(), h.rows = r.get<uint64_t>(), h.capacity_rows = r.get<uint64_t>();
  h.min_pushes = r.get<uint32_t>(), h.sketch_depth = r.get<uint32_t>(),
  h.sketch_width = r.get<uint32_t>();
  h.name_bytes = r.get<uint32_t>(), h.sketch_seed = r.get<uint64_t>(),
  h.evictions = r.get<uint64_t>();
  h.admissions_refused = r.get<uint64_t>(), h.full_refused = r.get<uint64_t>();
  return h;
}

// The bytes of everything after the header but the CRC, or 0 on overflow.
struct body_sizes {
  uint64_t bitmap = 0, row = 0, rows = 0, sketch = 0, total = 0;
};

static_assert(table_snapshot_arena_version == table_delta_arena_version,
              "one version number says, in both formats, that rows lie in the table's order");
static_assert(table_snapshot_lfu_version == table_delta_lfu_version,
              "one version number says, in both formats, that rows carry update counts");

// Whether the rows lie in the table's own order (a table without a capacity).
inline bool in_arena_order(const header& h) { return h.version == table_snapshot_arena_version; }

// Whether the rows carry an update count (a table with LFU eviction).
inline bool has_counts(const header& h) { return h.version == table_snapshot_lfu_version; }

// A row's bytes before its values: key, rank with a capacity, count with LFU.
inline uint64_t row_prefix_bytes(const header& h) {
  return 8 + (h.capacity_rows > 0 ? 4 : 0) + (has_counts(h) ? 4 : 0);
}

// The version is one this build reads (`base`, the LFU one, or with
// `arena_order` a table's own order's), LFU comes with a capacity and the
// table's own order without one.
table_error check_version(const header& h, uint16_t base, const char* what, bool arena_order = false);

inline body_sizes sizes_of(const header& h, size_t available) {
  body_sizes s;
  s.bitmap = (uint64_t{h.slot_count} + 63) / 64 * 8;
  s.row = row_prefix_bytes(h) + uint64_t{h.dim} * (1 + uint64_t{h.state_slots}) * 4;
  // Rows that could not fit the bytes at hand mean damage; checking first
  // keeps the product below from overflowing.
  if (h.rows > available / s.row)
    return s;
  s.rows = h.rows * s.row;
  s.sketch = h.min_pushes > 1 ? uint64_t{h.sketch_depth} * h.sketch_width * 2 : 0;
  s.total = h.name_bytes + s.bitmap + s.rows + s.sketch;
  return s;
}

inline table_error damage(table_errc code, std::string what) {
  return table_error(code, "table snapshot: " + std::move(what));
}

inline table_error mismatch(table_errc code, const std::string& what, uint64_t has, uint64_t expected) {
  return table_error(code, "table snapshot: " + what + " " + std::to_string(has) +
                               ", the shard's table has " + std::to_string(expected));
}


// Rows read ahead of the one being written (prefetch distance).
constexpr size_t rows_ahead = 8;

// `keys` (with their row numbers) sorted ascending.
std::vector<std::pair<uint64_t, uint32_t>> sorted_by_key(const std::vector<uint64_t>& keys);

// The header fields that describe `t`'s shape (no counts or counters).
header header_of(const embedding_table& t);

// The optimizer's state slots and the sketch's size agree with the format.
table_error check_header_fields(const header& h);

// The snapshot's shape (header, name and owned-slot bitmap) against the
// restoring shard's table.
table_error check_shape(const header& h, const std::string& name, const std::vector<uint64_t>& bitmap,
                        const embedding_table& t);

}  // namespace table_wire

// The friend of embedding_table that reads and rebuilds its arena.
class table_codec {
 public:
  static std::vector<std::pair<uint64_t, uint32_t>> rows_by_key(const embedding_table& t);
  // Asks for row r's bytes ahead of their use: rows are read in key order,
  // which is random in memory.
  static void prefetch(const embedding_table& t, uint32_t r) {
    const char* row = reinterpret_cast<const char*>(t.row_at(r));
    for (size_t b = 0; b < t.stride_ * sizeof(float); b += 64) __builtin_prefetch(row + b);
  }
  // Each row's place in the eviction order (0: the next victim; with LRU
  // the recency rank); empty without a capacity (no ranks are stored then).
  static std::vector<uint32_t> eviction_ranks(const embedding_table& t) {
    std::vector<uint32_t> rank(t.cfg_.capacity_rows > 0 ? t.rows_ : 0, 0);
    uint32_t next = 0;
    if (t.lfu()) {
      for (uint32_t k = t.first_tier_; k != no_row; k = t.tiers_[k].next)
        for (uint32_t r = t.tiers_[k].head; r != no_row; r = t.link(r, 1)) rank[r] = next++;
    } else if (t.cfg_.capacity_rows > 0) {
      for (uint32_t r = t.head_; r != no_row; r = t.link(r, 1)) rank[r] = next++;
    }
    return rank;
  }
  static bool lfu(const embedding_table& t) { return t.lfu(); }
  // Row r's update count (LFU only).
  static uint32_t update_count(const embedding_table& t, uint32_t r) {
    return t.tiers_[t.tier_of(r)].count;
  }
  // The LFU tiers, ascending, and the rows of one, oldest first.
  static uint32_t first_tier(const embedding_table& t) { return t.first_tier_; }
  static uint32_t next_tier(const embedding_table& t, uint32_t k) { return t.tiers_[k].next; }
  static uint32_t tier_tail(const embedding_table& t, uint32_t k) { return t.tiers_[k].tail; }
  static const float* values(const embedding_table& t, uint32_t r) {
    return t.row_at(r) + t.header_;
  }
  static const count_min_sketch& sketch(const embedding_table& t) { return t.sketch_; }
  static const table_counters& stats(const embedding_table& t) { return t.stats_; }

  static uint64_t encoded_bytes(const embedding_table& t);
  static uint32_t encode(const embedding_table& t, span_source& out);
  // The rows of a snapshot: version 3's block by block, the others' sorted by key.
  static void put_blocks(const embedding_table& t, table_wire::span_writer& w);
  static void put_rows_by_key(const embedding_table& t, const table_wire::header& h, table_wire::span_writer& w);
  static table_error restore_rows(embedding_table& t, table_wire::reader& in, uint64_t rows);
  // Version 3: rows in the table's order, copied a block at a time.
  static table_error restore_arena_rows(embedding_table& t, table_wire::parts_reader& in, uint64_t rows);
  static void restore_rest(embedding_table& t, table_wire::parts_reader& in, const table_wire::header& h);

  // Incremental snapshots (actors/core/table_delta.cpp).
  static std::vector<uint32_t> changed_row_numbers(const embedding_table& t);
  static bool is_changed(const embedding_table& t, uint32_t r) { return t.is_changed(r); }
  static uint32_t find(const embedding_table& t, uint64_t key) { return t.find(key); }
  static uint64_t key_at(const embedding_table& t, uint32_t r) { return t.key_at(r); }
  static uint32_t tail(const embedding_table& t) { return t.tail_; }
  static uint32_t previous(const embedding_table& t, uint32_t r) { return t.link(r, 0); }
  // Removes row r (the last row moves into its place).
  static void remove_row(embedding_table& t, uint32_t r);
  static uint32_t rows(const embedding_table& t) { return t.rows_; }
  static void reserve(embedding_table& t, uint64_t rows) { t.reserve_rows(rows); }
  // Asks for the index buckets and rows of up to embedding_table::prefetch_chunk keys.
  static void prefetch_keys(const embedding_table& t, const uint64_t* keys, size_t n) { t.prefetch(keys, n); }
  static constexpr size_t prefetch_chunk = embedding_table::prefetch_chunk;
  // Writes row r (or, for no_row, a new row of `key`) and, with LRU, makes
  // it the most recently updated; returns its row number. With LFU the
  // caller places it (place_at_count), r having been detached first.
  static uint32_t put_row_at(embedding_table& t, uint32_t r, uint64_t key, const float* values);
  // LFU: takes row r out of its tier; puts it at the tail of the tier of
  // `count` (embedding_table::place_at_count: ascending counts, one cursor).
  static void detach(embedding_table& t, uint32_t r) { t.tier_remove(r); }
  static void place_at_count(embedding_table& t, uint32_t r, uint32_t count, uint32_t& cursor) {
    t.place_at_count(r, count, cursor);
  }
  static count_min_sketch& sketch(embedding_table& t) { return t.sketch_; }
  static table_counters& stats(embedding_table& t) { return t.stats_; }
  static constexpr uint32_t no_row = embedding_table::no_row;
};

}  // namespace keel
