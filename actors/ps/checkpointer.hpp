#pragma once
// The checkpointer actor commits checkpoints; it never carries their bytes.
// Each shard writes its own snapshot file (parameter_shard.hpp) and reports
// its part, a checkpoint_manifest_msg of one entry (file, length, CRC, and
// the shard's snapshot step); once every shard's part of a checkpoint is in,
// the checkpointer checks that each file is there and of its length and
// writes the manifest through storage's snapshot_store, which commits the
// checkpoint, then applies retention. After a commit it tells `job`
// (checkpoint_committed, with a snapshot_ref per shard), which hands the refs
// to the shard supervisor and lets workers truncate their replay logs. It
// runs detached, on a thread of its own, so its fsyncs never stall the
// actors that train.
//
// Failures: a shard that could not write its file says so
// ((write_failed_atom, checkpoint, shard, step, reason)) and writes it again
// after a backoff; a manifest that could not be written is written again by
// the checkpointer (retry_min, doubling to retry_max) until it commits or a
// newer checkpoint completes (which replaces it). Either is reported as a
// job_event (checkpoint_failed, `failed` set) and leaves the previous
// checkpoint in force: workers paused by backpressure at its step
// (worker_core.hpp) wait for exactly that commit. A checkpoint that hears
// nothing new from any shard for `incomplete_timeout` while parts are
// missing is lost (reported as checkpoint_failed). A restarted checkpointer
// reopens the store (which removes what a crashed writer left up to the
// newest commit) and continues after the last committed checkpoint; the
// shards report their newest parts to it again.
//
// It is described by one checkpointer_config, the same for one started in
// this process and for one a node agent starts for another process
// (actors/cluster/node_protocol.hpp carries it as is); the file system to
// write through and the thread to run on are the checkpointer_env beside it.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <chrono>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/core/checkpoint_coordinator.hpp"
#include "messages/frame.hpp"
#include "storage/file_io.hpp"

namespace keel {

struct checkpointer_config {
  std::string dir;  // the store's directory (in a cluster absolute: every node must reach it)
  uint64_t keep_last = 3;
  uint32_t num_shards = 1;
  caf::actor job;
  // A checkpoint still missing a shard's part, with no news of it from any
  // shard for this long, is lost: reported as checkpoint_failed.
  std::chrono::milliseconds incomplete_timeout{5000};
  // After a failed manifest write, the same manifest is written again after
  // retry_min, doubling with each failure up to retry_max.
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5000};
  // The run it commits checkpoints of: every manifest carries it
  // (storage/run_identity.hpp).
  std::string run_id;
  std::string config_hash;
  std::string config;
};

// What this process gives its checkpointer beside the config.
struct checkpointer_env {
  std::shared_ptr<file_io> io;  // null: the real file system
  // Its own thread (true), so that blocking writes never stall the actors
  // that train in this process; false where none train (a cluster's
  // coordinator).
  bool detached = true;
};

// The field order is the wire format.
template <class I>
typename I::result_type inspect(I& f, checkpointer_config& x) {
  return f(caf::meta::type_name("keel.checkpointer_config"), x.dir, x.keep_last, x.num_shards, x.job,
           x.incomplete_timeout, x.run_id, x.config_hash, x.config, x.retry_min, x.retry_max);
}

// Sent to `job` after each durable commit.
struct checkpoint_committed {
  uint64_t checkpoint = 0;
  uint64_t step = 0;                    // the newest shard step in it
  std::vector<committed_shard> shards;  // by shard index
  // What writing it took (off the training path, but on the machine's
  // cores): the slowest shard's file write plus the manifest's, wall time;
  // CPU time of the writing threads, all shards' and the checkpointer's.
  int64_t write_us = 0;
  int64_t write_cpu_us = 0;
};

// Fails when the store cannot be opened or read.
caf::expected<caf::actor> spawn_checkpointer(caf::actor_system& sys, checkpointer_config cfg,
                                             checkpointer_env env = {});

}  // namespace keel

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::checkpoint_committed)
