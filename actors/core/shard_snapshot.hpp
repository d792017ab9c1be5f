#pragma once
// Turning a shard_core into a ShardSnapshot and back. A snapshot holds the
// applied parameters, their optimizer slots, the sparse table, and per worker
// the last applied seq and clock; BSP pushes still held for an incomplete
// step are not in it (their workers replay them from their logs). Restore
// checks every CRC and that each tensor has the dtype and shape this shard's
// configuration expects, and refuses with an error naming the tensor and
// both shapes otherwise. Restore never throws: a snapshot that its reader's
// traversal limit stops is refused as errc::damaged_snapshot.
//
// Embedding tables travel as one uint8 tensor each, "table.<name>", holding
// encode_table's sealed bytes (actors/core/table_snapshot.hpp), chunked like
// every tensor. Restore decodes each against the shard's table layout: a
// damaged table (bytes, counts, its own CRC) is errc::damaged_snapshot, a
// table of another name, d, optimizer or slot set, a missing table or one
// the layout lacks is errc::shape_mismatch, each naming the table.

#include <cstdint>
#include <memory>

#include <caf/expected.hpp>

#include "actors/core/shard_core.hpp"
#include "messages/buffer_pool.hpp"
#include "storage/checkpoint_files.hpp"  // verify_mode

namespace keel {

// The snapshot carries `run`'s id and configuration hash
// (storage/run_identity.hpp). With `table_rows` false (a read-out, never
// restored) the tables' rows stay out: the snapshot holds instead the uint8
// tensor "tables.sha256", each table's content_sha256 (32 bytes, table by
// table), computed here where the rows live, and "tables.counters" (below).
// Tables are encoded straight into the message. Its memory comes from
// `pool` and goes back there when the last holder of the snapshot lets go:
// a shard that snapshots periodically gives each one a pool of its own
// (snapshot_pool), so a snapshot reuses the pages of one superseded before it.
caf::expected<shard_snapshot_msg> snapshot_of(const shard_core& core, uint64_t checkpoint,
                                              int64_t created_unix_ms, const run_identity& run = {},
                                              bool table_rows = true,
                                              std::shared_ptr<buffer_pool> pool = buffer_pool::process_default());

// A pool for one shard's periodic snapshots: it keeps one idle buffer, the
// largest given back (the next snapshot's memory; one superseded snapshot
// is let go before the next is taken), of any size, where the process
// default keeps 512 MiB in all, less than one snapshot of a large table.
// The buffer goes when the pool does.
std::shared_ptr<buffer_pool> snapshot_pool();

// The name of the read-out's tensor of table digests.
constexpr const char* table_digests_tensor = "tables.sha256";
// The read-out also carries int64 "tables.counters" [tables x 5]: each
// table's table_counters rows, evictions, admissions_refused, full_refused,
// bytes (embedding_table.hpp), table by table.
constexpr const char* table_counters_tensor = "tables.counters";
constexpr size_t table_counter_fields = 5;

// `mode` structure skips the CRCs: only for a frame check_shard_snapshot
// accepted already (frames are immutable).
// `rows` (the model's initial rows) is needed when the shard has tables.
caf::expected<shard_core> restore_shard(const shard_config& cfg,
                                        schema::ShardSnapshot::Reader snap,
                                        verify_mode mode = verify_mode::checksums,
                                        const table_row_source& rows = {});

// Every check restore_shard makes (CRCs, dtypes, shapes, sparse keys,
// workers), without copying the parameters: whether a shard of `cfg` could
// restore from `snap`. What a supervisor's snapshot validator runs.
caf::error check_shard_snapshot(const shard_config& cfg, schema::ShardSnapshot::Reader snap);

// The same check on a whole frame, remembering which frames' CRCs are known
// good: one snapshot_of made in this process (it computed the CRCs from the
// shard's own arrays) or one this function accepted before. Frames are
// immutable, so for those the CRC pass is skipped and only the structure
// (dtypes, shapes, keys, workers) is checked again. A frame read from a file
// or received from another process is checked in full the first time. This
// is what keeps a CRC pass over the parameters off a crashed shard's restart.
caf::error check_shard_snapshot(const shard_config& cfg, const frame_ptr& snap);

}  // namespace keel
