#pragma once
// Incremental shard snapshots: a delta holds what changed in a shard_core
// since its last clear_changes() (shard_core.hpp), and a chain (a base, then
// deltas each on the one before) restores the shard it was taken from.
//
// A delta is a ShardSnapshot (messages/protocol.capnp) whose parentFile,
// parentCheckpoint and baseCheckpoint name its place in the chain, with the
// header (applied seqs, step, version) of a full snapshot and the tensors:
//   "dense.chunks"  int64 [c]: the dense chunks (shard_core::dense_chunk_floats
//                   keys each) that changed, ascending;
//   "dense", "dense.slot1", "dense.slot2"  float32 [v]: those chunks' values
//                   and optimizer state, chunk after chunk;
//   "sparse.keys", "sparse.entries", "workers.clock", "counters": whole, as
//                   in a full snapshot (the legacy sparse scalars are not
//                   tracked);
//   "table.<name>"  uint8: the table's delta (actors/core/table_delta.hpp).
// Restoring a chain reads its links one at a time (each is let go before the
// next is read): the base's state (restore_shard's checks), then each delta
// with its checks (CRCs with verify_mode::checksums, shapes, chunk indices,
// the table deltas' own checks); a link that fails one fails the restore,
// and the state built so far is dropped. Errors name the shard,
// the link's checkpoint and what was wrong: damage is errc::damaged_snapshot,
// another layout errc::shape_mismatch. That the links' files follow each
// other by name is storage's check (the chain reader).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "actors/core/shard_core.hpp"
#include "messages/buffer_pool.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/run_identity.hpp"

namespace keel {

// Where a delta sits: its parent (the shard's previous snapshot file in the
// chain) and the chain's base checkpoint.
struct delta_parent {
  std::string file;
  uint64_t checkpoint = 0;
  uint64_t base_checkpoint = 0;
};

// The delta of `core` since its last clear_changes(), as checkpoint
// `checkpoint` on `parent`, from `pool`. Fails with invalid_argument when a
// table dropped its changes (core.changes_complete() false: take a base).
caf::expected<shard_snapshot_msg> delta_snapshot_of(const shard_core& core, uint64_t checkpoint,
                                                    int64_t created_unix_ms, const run_identity& run,
                                                    const delta_parent& parent,
                                                    std::shared_ptr<buffer_pool> pool = buffer_pool::process_default());

// Link `i` of a chain (0: the base), read and validated by the caller.
using chain_reader = std::function<caf::expected<stored_snapshot>(size_t i)>;

// The shard that the `links` snapshots `read` gives restore (see above).
// `mode` as for restore_shard: structure when the reader checked every byte.
caf::expected<shard_core> restore_chain(const shard_config& cfg, size_t links, const chain_reader& read,
                                        verify_mode mode = verify_mode::checksums,
                                        const table_row_source& rows = {});

// A chain restored as far as one of its links, to go on from later (a
// shard's state restored ahead of its move: actors/ps/shard_standby.hpp):
// the state its links gave, and the checkpoint of the last one.
struct chain_state {
  shard_core::state state;
  uint64_t checkpoint = 0;
};

// restore_chain's work without the core at the end: links [0, links).
caf::expected<chain_state> restore_chain_state(const shard_config& cfg, size_t links, const chain_reader& read,
                                               verify_mode mode = verify_mode::checksums,
                                               const table_row_source& rows = {});

// Applies links [first, links) of the same chain to `s`, each a delta on
// the one before (link first-1 is the one `s` holds). After an error `s`
// may hold part of a delta: restore the chain again instead.
caf::error extend_chain_state(const shard_config& cfg, chain_state& s, size_t first, size_t links,
                              const chain_reader& read, verify_mode mode = verify_mode::checksums);

}  // namespace keel
