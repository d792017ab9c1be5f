#pragma once
// The contract of every protocol message, checked on a capnp reader. Each
// function returns an empty error when the message satisfies its contract,
// else a keel error (errc::invalid_field, unsupported_version or
// limit_exceeded) that names the message, the field and the bad value.
// Readers may throw kj::Exception on malformed pointers; `decode` catches it.

#include <cstddef>
#include <cstdint>

#include <caf/error.hpp>

#include "messages/finite.hpp"
#include "messages/protocol.capnp.h"

namespace keel {

class frame;

// Limits a receiver sets on purpose. The defaults suit a parameter server
// with shards of up to a few GiB sent in 1-4 MiB chunks.
struct decode_limits {
  size_t max_dense_ranges = size_t{1} << 16;
  size_t max_sparse_keys = size_t{1} << 24;
  size_t max_tensors = size_t{1} << 16;
  size_t max_tensor_rank = 8;
  size_t max_list_entries = size_t{1} << 20;  // applied[], manifest entries, actor types
  size_t max_text_bytes = 4096;
  bool require_finite = true;                 // reject NaN/Inf in pushes and replies
  uint64_t traversal_limit_factor = 8;        // reader limit = factor * frame words
  // Set by `decode`, not by callers: the frame being checked. Float values
  // it knows finite (frame::known_finite) are not scanned again.
  const frame* source = nullptr;
};

caf::error validate(schema::Push::Reader m, const decode_limits& limits);
caf::error validate(schema::PushAck::Reader m, const decode_limits& limits);
caf::error validate(schema::PullRequest::Reader m, const decode_limits& limits);
caf::error validate(schema::PullReply::Reader m, const decode_limits& limits);
caf::error validate(schema::SnapshotRequest::Reader m, const decode_limits& limits);
caf::error validate(schema::ShardSnapshot::Reader m, const decode_limits& limits);
caf::error validate(schema::CheckpointManifest::Reader m, const decode_limits& limits);
caf::error validate(schema::DirectoryUpdate::Reader m, const decode_limits& limits);
caf::error validate(schema::Heartbeat::Reader m, const decode_limits& limits);
caf::error validate(schema::NodeJoin::Reader m, const decode_limits& limits);

// Size in bytes of one element of a dtype; 0 for a value this build does not know.
size_t dtype_size(schema::DType t);

}  // namespace keel
