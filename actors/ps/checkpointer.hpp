#pragma once
// The checkpointer actor collects the shards' snapshots of each checkpoint
// (shards send them straight to it at the same BSP step, see
// parameter_shard.hpp), writes them through storage's snapshot_store once all
// shards' are in, and commits the checkpoint's manifest. Each snapshot is
// decoded (validated) once, when it arrives; what the commit needs of it
// (shard, step) travels beside the frame from then on. It runs detached, on a thread of its own, so
// its blocking, fsync'ing writes never stall the actors that train. After a
// commit it tells `job` (checkpoint_committed), which hands the snapshots to
// the shard supervisor and lets workers truncate their replay logs. A failed
// write leaves the previous checkpoint in force and is reported as a
// job_event; a restarted checkpointer reopens the store (which removes what a
// crashed writer left) and continues after the last committed checkpoint.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <chrono>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/core/checkpoint_coordinator.hpp"
#include "messages/frame.hpp"
#include "storage/file_io.hpp"

namespace keel {

struct checkpointer_options {
  std::filesystem::path dir;
  size_t keep_last = 3;
  uint32_t num_shards = 1;
  caf::actor job;
  std::shared_ptr<file_io> io;  // null: the real file system
  // A checkpoint still missing a shard's snapshot this long after its first
  // one arrived is lost (the snapshot was): reported as checkpoint_failed.
  std::chrono::milliseconds incomplete_timeout{5000};
  // Its own thread (true), so that blocking writes never stall the actors
  // that train in this process; false where none train (a cluster's
  // coordinator).
  bool detached = true;
};

// Sent to `job` after each durable commit.
struct checkpoint_committed {
  uint64_t checkpoint = 0;
  uint64_t step = 0;                    // the newest shard step in it
  std::vector<committed_shard> shards;  // by shard index
  // What writing it took the checkpointer (off the training path, but on
  // the machine's cores): wall time, and CPU time of its thread.
  int64_t write_us = 0;
  int64_t write_cpu_us = 0;
};

caf::expected<caf::actor> spawn_checkpointer(caf::actor_system& sys, checkpointer_options opts);

}  // namespace keel

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::checkpoint_committed)
