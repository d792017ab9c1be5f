#pragma once
// A snapshot_writer writes one shard's periodic snapshots into the
// checkpoint directory, on a thread of its own (a detached actor), so the
// shard's actor never waits for a write or an fsync and the shard's node,
// not the coordinator, carries the bytes. It answers
//   (write_atom, shard_snapshot_msg, tag) -> manifest_entry
// with the file written atomically and durably (storage's sealed files) as
// snapshot_name(checkpoint, shard, tag), and what the write took (wall and
// CPU time of its thread); a failure is the error naming file and reason,
// and leaves no file. It also answers
//   (seal_atom, shared_ptr<streamed_snapshot>) -> manifest_entry
// for a snapshot its shard streamed into a temporary file itself
// (actors/core/shard_stream.hpp): fsync, rename, fsync of the directory
// (commit_streamed), the entry's times those of the commit alone. Requests
// are served in order. It stops when its shard
// does (the shard ends it), after the write in progress.

#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>

#include "storage/checkpoint_files.hpp"
#include "storage/snapshot_stream.hpp"

namespace keel {

// `io` null: the real file system.
caf::actor spawn_snapshot_writer(caf::actor_system& sys, std::string dir, std::shared_ptr<file_io> io);

}  // namespace keel

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::manifest_entry)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<keel::streamed_snapshot>)
