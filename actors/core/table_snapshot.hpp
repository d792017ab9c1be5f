#pragma once
// The snapshot of one embedding_table (actors/core/embedding_table.hpp) as a
// sealed binary section, and the table's content hash. A shard embeds the
// bytes in its ShardSnapshot (messages/protocol.capnp) as it likes, e.g. a
// Section named after the table, or a uint8 Tensor whose chunks keep each
// Data under Cap'n Proto's 512 MiB limit; the section carries its own
// CRC32C (storage/crc32c.hpp), so it is checked whatever carries it.
//
// Layout (little-endian, fixed widths; format version 3 for a table
// without a capacity, 1 for one with least-recently-updated eviction, 2
// for one with least-frequently-updated eviction, whose rows also carry a
// count):
//   header, 88 bytes:
//     0 u64 magic "KEELTABL"   8 u16 version   10 u8 dtype (0 float32)
//    11 u8 optimizer kind (0 sgd, 1 momentum, 2 adagrad, 3 adam)
//    12 u32 dim   16 u32 state slots per value   20 u32 hash slot count
//    24 u64 rows   32 u64 capacity_rows   40 u32 admission min_pushes
//    44 u32 sketch depth   48 u32 sketch width   52 u32 name bytes
//    56 u64 sketch seed   64 u64 evictions   72 u64 admissions_refused
//    80 u64 full_refused
//   the name; the owned-slot bitmap (ceil(slots / 64) u64, as slot_set);
//   the rows, in version 3 in the table's own order (its arena's: the
//   bytes of each row as the table holds them, so a snapshot is written
//   block by block and restored into blocks, with no sort and no row
//   copied alone; versions 1 and 2, and version 1 without a capacity as
//   earlier builds wrote it, in ascending key order), each: u64 key, with a capacity a u32
//   eviction rank (0 = the next victim: with LRU the least recently
//   updated), in version 2 a u32 update count (>= 1, not decreasing in
//   eviction order: LFU's order is by count, then recency), dim f32 values,
//   then state slots x dim f32 (slot by slot); with admission (min_pushes > 1) the
//   sketch's depth x width u16 counters; last a u32 CRC32C of every byte
//   before it.
//
// decode_table checks, and names the first failure: damage first (malformed:
// length, magic, version; count_mismatch: counts that disagree with the
// length or each other; crc_mismatch), then the shape against the restoring
// shard's table_config (dtype_mismatch, name_mismatch, dim_mismatch,
// optimizer_mismatch, slots_mismatch: slot count or owned slots,
// options_mismatch: capacity, eviction policy or admission), then the rows
// (keys ascending in versions 1 and 2, duplicate_key, key_outside_slots, non_finite values or
// state, count_mismatch: ranks not a permutation, counts 0 or out of
// order). It never
// returns a table built from bytes that failed a check. Pure functions.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/core/embedding_table.hpp"
#include "storage/byte_span.hpp"

namespace keel {

constexpr uint64_t table_snapshot_magic = 0x4b45454c5441424cULL;  // "KEELTABL"
constexpr uint16_t table_snapshot_version = 1;      // unbounded or LRU tables
constexpr uint16_t table_snapshot_lfu_version = 2;  // LFU tables: rows carry update counts
constexpr uint16_t table_snapshot_arena_version = 3;  // tables without a capacity: rows in the table's order
constexpr size_t table_snapshot_header_bytes = 88;

// The length of `table`'s snapshot in bytes.
uint64_t encoded_table_bytes(const embedding_table& table);

// Writes `table`'s snapshot (layout above) into `out`, span after span: how
// a shard writes it straight into its snapshot message, once, with no
// buffer of its own. The spans must hold exactly encoded_table_bytes(table)
// bytes between them (else std::invalid_argument, and nothing is written).
// Returns the CRC32C of all the bytes written, the trailing table CRC
// included (a tensor's CRC), computed while writing. A table with a
// capacity has its rows sorted by key (16 bytes a row of scratch); one
// without is written block by block as it lies in memory.
uint32_t encode_table_into(const embedding_table& table, const std::vector<byte_span>& out);

// The same into the spans `out` hands out one at a time (a file written
// through one buffer: storage/byte_span.hpp). Their sizes are the caller's
// to get right: exactly encoded_table_bytes(table) in all, the last span
// filled completely (a source that runs dry is std::logic_error).
uint32_t encode_table_into(const embedding_table& table, span_source& out);

// The same snapshot as a vector of its own.
std::vector<unsigned char> encode_table(const embedding_table& table);

// Whether a table's (or a delta's) bytes are checked against their own
// trailing CRC32C: `check`, unless a CRC over the very same bytes has just
// been checked (`covered`: the snapshot tensor's CRC, or its file's payload
// CRC; a shard's restore, actors/core/shard_snapshot.cpp). Every other check
// runs either way.
enum class table_crc { check, covered };

// The table the `n` bytes at `data` hold, for a shard whose table is
// configured as `expected` (its rates, capacity and admission too) and whose
// rows start from `init`. Errors: see above.
table_result<embedding_table> decode_table(const unsigned char* data, size_t n,
                                           const table_config& expected, row_initializer init,
                                           table_crc crc = table_crc::check);

// The same from bytes in consecutive parts (a snapshot tensor's chunks): a
// table in its own order (version 3) is copied from them straight into its
// blocks; the other versions are gathered first.
table_result<embedding_table> decode_table(const std::vector<byte_view>& parts, const table_config& expected,
                                           row_initializer init, table_crc crc = table_crc::check);

using table_digest = std::array<unsigned char, 32>;

// SHA-256 of the table's contents: u32 name bytes, the name, u32 dim, u64
// rows, then each row in ascending key order as u64 key and dim f32 values
// (little-endian; optimizer state and recency not included). Equal for two
// tables that hold the same keys with bit-identical values, wherever their
// rows sit in memory; a restored table hashes as the one it was taken from.
table_digest content_sha256(const embedding_table& table);

// SHA-256 of the digests in the order given: how a run's fingerprint is
// combined from per-shard (or per-table) hashes without gathering rows. The
// order (e.g. shard number, then table name) is the caller's to fix.
table_digest combine_digests(const std::vector<table_digest>& parts);

// Lower-case hex, 64 characters.
std::string to_hex(const table_digest& d);

}  // namespace keel
