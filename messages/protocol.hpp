#pragma once
// The protocol's message types as CAF message elements: one alias per
// schema struct of messages/protocol.capnp, and the type names under which
// they are registered for remote use (messages/register_types.hpp).

#include "messages/protocol.capnp.h"
#include "messages/typed_message.hpp"

namespace keel {

template <> struct schema_name<schema::Push> { static constexpr const char* value = "keel.Push"; };
template <> struct schema_name<schema::PushAck> { static constexpr const char* value = "keel.PushAck"; };
template <> struct schema_name<schema::PullRequest> { static constexpr const char* value = "keel.PullRequest"; };
template <> struct schema_name<schema::PullReply> { static constexpr const char* value = "keel.PullReply"; };
template <> struct schema_name<schema::SnapshotRequest> { static constexpr const char* value = "keel.SnapshotRequest"; };
template <> struct schema_name<schema::ShardSnapshot> { static constexpr const char* value = "keel.ShardSnapshot"; };
template <> struct schema_name<schema::CheckpointManifest> { static constexpr const char* value = "keel.CheckpointManifest"; };
template <> struct schema_name<schema::DirectoryUpdate> { static constexpr const char* value = "keel.DirectoryUpdate"; };
template <> struct schema_name<schema::Heartbeat> { static constexpr const char* value = "keel.Heartbeat"; };
template <> struct schema_name<schema::NodeJoin> { static constexpr const char* value = "keel.NodeJoin"; };

using push_msg = msg<schema::Push>;
using push_ack_msg = msg<schema::PushAck>;
using pull_request_msg = msg<schema::PullRequest>;
using pull_reply_msg = msg<schema::PullReply>;
using snapshot_request_msg = msg<schema::SnapshotRequest>;
using shard_snapshot_msg = msg<schema::ShardSnapshot>;
using checkpoint_manifest_msg = msg<schema::CheckpointManifest>;
using directory_update_msg = msg<schema::DirectoryUpdate>;
using heartbeat_msg = msg<schema::Heartbeat>;
using node_join_msg = msg<schema::NodeJoin>;

// Builds a message of schema S: `build<schema::Push>(hint, [](auto b) {...})`
// hands `fill` the root builder (version already set) and returns the msg.
template <class S, class Fill>
msg<S> build(size_t size_hint_words, Fill&& fill) {
  frame_builder fb(size_hint_words);
  auto root = fb.message().initRoot<S>();
  root.setVersion(schema::PROTOCOL_VERSION);
  fill(root);
  return msg<S>(fb.finish());
}

}  // namespace keel
