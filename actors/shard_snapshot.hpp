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

#include "actors/shard_core.hpp"

namespace keel {

caf::expected<shard_snapshot_msg> snapshot_of(const shard_core& core, uint64_t checkpoint,
                                              int64_t created_unix_ms);

caf::expected<shard_core> restore_shard(const shard_config& cfg,
                                        schema::ShardSnapshot::Reader snap);

}  // namespace keel
