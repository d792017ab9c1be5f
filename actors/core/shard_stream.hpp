#pragma once
// A shard's periodic snapshot streamed into its checkpoint file
// (storage/snapshot_stream.hpp) instead of built in memory first: what a
// shard whose snapshot is large does, so that its node never holds a second
// copy of its tables. The same snapshot, base or delta, as snapshot_of and
// delta_snapshot_of make (any reader reads the file), written on the
// calling thread (the shard's: the state must not change meanwhile); only
// the durable commit (commit_streamed) is left for another thread.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <caf/expected.hpp>

#include "actors/core/shard_delta.hpp"
#include "storage/run_identity.hpp"
#include "storage/snapshot_stream.hpp"

namespace keel {

// Writes checkpoint `checkpoint` of `core` as `dir/name.tmp-<tmp_tag>`: a
// delta on `parent`, or a base when there is none. Errors: as
// stream_snapshot's, and delta_snapshot_of's for a delta.
caf::expected<streamed_snapshot> stream_snapshot_of(const shard_core& core, file_io& io,
                                                    const std::filesystem::path& dir, const std::string& name,
                                                    const std::string& tmp_tag, uint64_t checkpoint,
                                                    int64_t created_unix_ms, const run_identity& run,
                                                    const std::optional<delta_parent>& parent);

// About the bytes of `core`'s next snapshot: a delta's estimate, or a
// base's (its tables' encodings and its dense parameters with their state).
uint64_t snapshot_bytes_estimate(const shard_core& core, bool delta);

}  // namespace keel
