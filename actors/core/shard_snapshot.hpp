#pragma once
// Turning a shard_core into a ShardSnapshot and back. A snapshot holds the
// applied parameters, their optimizer slots, the sparse table, and per worker
// the last applied seq and clock; BSP pushes still held for an incomplete
// step are not in it (their workers replay them from their logs). Restore
// checks every CRC and that each tensor has the dtype and shape this shard's
// configuration expects, and refuses with an error naming the tensor and
// both shapes otherwise. Restore never throws: a snapshot that its reader's
// traversal limit stops is refused as errc::damaged_snapshot.

#include <cstdint>

#include <caf/expected.hpp>

#include "actors/core/shard_core.hpp"
#include "storage/checkpoint_files.hpp"  // verify_mode

namespace keel {

// The snapshot carries `run`'s id and configuration hash (storage/run_identity.hpp).
caf::expected<shard_snapshot_msg> snapshot_of(const shard_core& core, uint64_t checkpoint,
                                              int64_t created_unix_ms, const run_identity& run = {});

// `mode` structure skips the CRCs: only for a frame check_shard_snapshot
// accepted already (frames are immutable).
caf::expected<shard_core> restore_shard(const shard_config& cfg,
                                        schema::ShardSnapshot::Reader snap,
                                        verify_mode mode = verify_mode::checksums);

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
