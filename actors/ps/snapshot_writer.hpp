#pragma once
// A snapshot_writer writes one shard's periodic snapshots into the
// checkpoint directory, on a thread of its own (a detached actor), so the
// shard's actor never waits for a write or an fsync and the shard's node,
// not the coordinator, carries the bytes. It answers
//   (write_atom, shard_snapshot_msg, tag) -> manifest_entry
// with the file written atomically and durably (storage's sealed files) as
// snapshot_name(checkpoint, shard, tag), and what the write took (wall and
// CPU time of its thread); a failure is the error naming file and reason,
// and leaves no file. Requests are served in order. It stops when its shard
// does (the shard ends it), after the write in progress.

#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>

#include "storage/checkpoint_files.hpp"

namespace keel {

// `io` null: the real file system.
caf::actor spawn_snapshot_writer(caf::actor_system& sys, std::string dir, std::shared_ptr<file_io> io);

}  // namespace keel

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::manifest_entry)
