#pragma once
// An incremental snapshot of one embedding_table: what changed since the
// table's last clear_changes() (embedding_table.hpp), as a sealed binary
// section a shard carries in its delta ShardSnapshot as it carries a full
// one (actors/core/shard_snapshot.hpp), and applying it to the table as it
// was at that mark (the parent's restored table). Pure functions.
//
// Layout (little-endian, fixed widths; format version 3 for a table
// without a capacity, 1 with least-recently-updated eviction, 2 with
// least-frequently-updated eviction):
//   header, 104 bytes: the 88 bytes of a full table snapshot's header
//     (table_snapshot.hpp) with magic "KEELTDLT", `rows` the table's row
//     count once the delta is applied and the counters as of the delta;
//     then 88 u64 changed rows, 96 u64 removed keys;
//   the name; the owned-slot bitmap (as in a full snapshot);
//   the changed rows (created or updated since the mark), in version 3 in
//   the table's own order (ascending row numbers: applied to its parent's
//   table in that order, the new rows take the places they had, so a
//   restored table lies in memory as the one it was taken from), else in
//   ascending key order, each: u64 key, with a capacity a u32 eviction rank among the
//   changed rows (0 = the first to go of them; with LRU the least recently
//   updated: every changed row is more recent than every unchanged one), in
//   version 2 a u32 update count (>= 1, not decreasing in rank order: a
//   changed row follows the unchanged rows of its count), dim f32 values,
//   then state slots x dim f32;
//   the removed keys (evicted since the mark and without a row now),
//   ascending, u64 each (none in version 3);
//   with admission (min_pushes > 1) the whole sketch, as in a full snapshot;
//   last a u32 CRC32C of every byte before it.
//
// apply_table_delta checks everything in the bytes before it changes the
// table: damage (malformed, count_mismatch, crc_mismatch), the shape against
// the table's configuration (table_snapshot.hpp's errors), the rows (keys
// ascending but in version 3, duplicate_key, key_outside_slots, non_finite, ranks a
// permutation, counts >= 1 and not decreasing in rank order), removed keys
// ascending, in the slots and not among the changed rows, and that the
// table would then hold the header's row count
// (count_mismatch otherwise, naming both: a delta applied to a table other
// than its parent's is found out when that count differs; the guard that it
// is the parent is the chain's file linkage, storage's check). Then it
// applies: removed rows go, changed rows are written (created where the
// table has none) and become the most recently updated (with LFU: of their
// count), in rank order. A refused delta leaves the table as it was.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "actors/core/embedding_table.hpp"
#include "actors/core/table_snapshot.hpp"
#include "storage/byte_span.hpp"

namespace keel {

constexpr uint64_t table_delta_magic = 0x4b45454c54444c54ULL;  // "KEELTDLT"
constexpr uint16_t table_delta_version = 1;      // unbounded or LRU tables
constexpr uint16_t table_delta_lfu_version = 2;  // LFU tables: rows carry update counts
constexpr uint16_t table_delta_arena_version = 3;  // tables without a capacity: rows in the table's order
constexpr size_t table_delta_header_bytes = 104;

// What a delta of a table will hold, gathered once: its length is needed
// before its bytes are written (into a snapshot message's chunks).
struct table_delta_plan {
  std::vector<std::pair<uint64_t, uint32_t>> changed;  // (key, row number), in the delta's order
  std::vector<uint32_t> ranks;                         // per changed row, with a capacity
  std::vector<uint32_t> counts;                        // per changed row, with LFU
  std::vector<uint64_t> removed;                       // ascending
  uint64_t bytes = 0;                                  // of the encoded delta
};

// The plan of `table`'s delta since its last mark. Needs
// table.changes_complete() (else std::logic_error: take a full snapshot).
table_delta_plan plan_table_delta(const embedding_table& table);

// Writes the delta `plan` describes into `out` (exactly plan.bytes between
// the spans, else std::invalid_argument); returns the CRC32C of all the
// bytes written (a tensor's CRC). The table must not change in between.
uint32_t encode_table_delta_into(const embedding_table& table, const table_delta_plan& plan,
                                 const std::vector<byte_span>& out);
// The same into spans handed out one at a time (exactly plan.bytes in all).
uint32_t encode_table_delta_into(const embedding_table& table, const table_delta_plan& plan, span_source& out);

// The same delta as a vector of its own.
std::vector<unsigned char> encode_table_delta(const embedding_table& table);

// Applies the delta in the `n` bytes at `data` to `table` (see above).
// `crc`: table_snapshot.hpp's table_crc.
table_error apply_table_delta(embedding_table& table, const unsigned char* data, size_t n,
                              table_crc crc = table_crc::check);

// The same from bytes in consecutive parts (a snapshot tensor's chunks),
// gathered first when there are several.
table_error apply_table_delta(embedding_table& table, const std::vector<byte_view>& parts,
                              table_crc crc = table_crc::check);

// What a delta holds, read from its header (for reports): changed rows,
// removed keys, rows after. Damage as apply_table_delta finds it in the
// header and length (no CRC pass).
struct table_delta_counts {
  uint64_t changed = 0, removed = 0, rows_after = 0;
};
table_result<table_delta_counts> table_delta_counts_of(const unsigned char* data, size_t n);

}  // namespace keel
