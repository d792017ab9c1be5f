#pragma once
// How a snapshot_store names its files, in one flat directory:
//   ckpt-00000000000000000042.manifest          checkpoint 42's manifest
//   ckpt-00000000000000000042.shard-3.snap      shard 3's snapshot in it
//   ckpt-00000000000000000042.shard-3.<tag>.snap the same, written by the
//                                               shard itself: a tag of 16 hex
//                                               digits makes every write's
//                                               name its own, so a shard that
//                                               writes a checkpoint again
//                                               (after a restart) never
//                                               replaces a committed file
//   <either name>.tmp-<pid>-<n>                 a write in progress
// Zero-padded ids make `ls` list checkpoints in order. Parsing is strict: a
// name that does not match exactly is not the store's, and the store never
// touches it. Pure functions.

#include <cstdint>
#include <optional>
#include <string>

namespace keel {

enum class store_file_kind { manifest, snapshot, temporary };

struct store_file_name {
  store_file_kind kind = store_file_kind::manifest;
  uint64_t checkpoint = 0;
  uint32_t shard = 0;  // snapshots only
};

std::string manifest_name(uint64_t checkpoint);
std::string snapshot_name(uint64_t checkpoint, uint32_t shard);
std::string snapshot_name(uint64_t checkpoint, uint32_t shard, uint64_t tag);

// The parsed name, or nothing if `name` is not one of the store's files. A
// temporary file reports the checkpoint of the name it was meant to get.
std::optional<store_file_name> parse_store_file_name(const std::string& name);

}  // namespace keel
