#pragma once
// The parameter_shard actor: a shard_core behind CAF messages. It answers
//   push_msg                  -> push_ack_msg (applied, accepted, duplicate,
//                                rejected or outOfOrder: bad input is
//                                rejected with a reason, never a crash)
//   pull_request_msg          -> pull_reply_msg once the consistency rule
//                                allows (the reply waits until then)
//   snapshot_request_msg      -> shard_snapshot_msg of its state now
//   (status_atom, worker)     -> (received seq, applied seq, bsp clock, epoch)
//   (fence_atom, epoch)       -> nothing; a newer epoch than its own stops it
//   (params_atom)             -> shard_snapshot_msg (the final read-out;
//                                its tables as digests, not rows)
// Every `snapshot_every_steps` complete BSP steps it takes a snapshot at
// that step boundary (so every shard of a checkpoint holds the same step)
// and writes it itself into `checkpoint_dir` through its snapshot_writer
// (snapshot_writer.hpp: its own thread, on this shard's node); then it
// reports the file (name, length, CRC: its part of the checkpoint, a
// checkpoint_manifest_msg of one entry) to the checkpointer, which commits
// the manifest once every shard's part is in. No snapshot bytes leave the
// shard's process, and once the file is durable the shard lets its snapshot
// go; a large snapshot it streams into its file itself instead
// (stream_above_bytes). A failed write is reported ((write_failed_atom,
// checkpoint, shard, step, reason)) and, for a snapshot in memory, tried
// again after a backoff (retry_min, doubling up to retry_max) while no newer
// snapshot replaces it. It finds the checkpointer
// by watching its name in `directory`; failures while none is up are
// reported once one is, and a new checkpointer incarnation gets its newest
// written part again.
// Its periodic snapshots are bases or deltas on the one before
// (actors/core/snapshot_chain.hpp, `chain`): the part it reports names the
// chain a delta applies on.
// With a `peer_replica` it sends each file it wrote there (its frame, the
// file's record and the chain it extends); a restore from `restore_from`
// reads each file of the chain from `restore_replica`'s copy where one is
// there and checks (a miss or a bad copy: the directory's file), and says on
// stderr how many files each served ("... from the peer's memory, ... from
// the directory").
// It starts from the first of `restore_from` (newest first) whose chain
// validates (read on this shard's node, one file at a time: every byte's
// CRC, the very files committed, run, configuration and their order), else
// from `initial_dense`; a file found damaged is not read again for an older ref
// (whose chain holds it), and a fall-back past one is said on stderr. When
// no candidate of restore_from validates it starts from `initial_dense` if
// given (as a supervisor does when no snapshot validates: the workers' logs
// then call for a rollback), naming each file and why on stderr; else the
// spawn fails with that text.
// Pushes, pulls and status requests arrive, and acks, pull replies and
// snapshots leave, through its link_ends (actors/faults/link_ends.hpp),
// where the job's link faults, if any, act.
//
// Fencing: each incarnation has an epoch (`epoch`, from the job, greater for
// every incarnation it starts; 0: unfenced). Its acks and pull replies carry
// it; a push or pull that names another epoch is refused with
// errc::stale_incarnation, neither applied nor acknowledged, and one that
// names a newer epoch (or a fence_atom with one) tells this incarnation it
// has been replaced: it stops. A push or pull naming epoch 0 names none.
//
// A shard is described by one parameter_shard_config, the same for a shard
// started in this process and for one a node agent starts for another
// process (actors/cluster/node_protocol.hpp carries it as is); the link
// faults, which stay in the job's process, are the parameter_shard_env
// beside it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/core/shard_core.hpp"
#include "actors/core/snapshot_chain.hpp"
#include "messages/protocol.hpp"
#include "messages/wire_bits.hpp"
#include "storage/checkpoint_files.hpp"

namespace keel {

class link_faults;
class model;
class replica_store;
class shard_standby_store;

struct parameter_shard_config {
  shard_config core;                 // the shard_core's keys, rule and optimizer
  std::vector<float> initial_dense;  // core.dense.size() values, used without a snapshot
  std::vector<snapshot_ref> restore_from;  // restart from the first of these that validates
  uint64_t snapshot_every_steps = 0; // 0: snapshots only on request
  caf::actor directory;              // where it finds "checkpointer" (may be invalid: no snapshots)
  std::string checkpoint_dir;        // where it writes its snapshots (needed with snapshot_every_steps)
  std::chrono::milliseconds retry_min{100};  // the backoff after a failed write
  std::chrono::milliseconds retry_max{5000};
  // Incremental checkpoints: when its snapshot is a base, when a delta
  // (actors/core/snapshot_chain.hpp; full_every 1: always a base).
  chain_options chain;
  // A periodic snapshot of at least this many bytes is streamed into its
  // file by the shard itself as it is encoded (actors/core/shard_stream.hpp),
  // never whole in memory; its writer only makes it durable. If its write
  // fails it is streamed again, as a base, after the backoff only if the
  // shard has not changed since (its workers wait at that step); else the
  // checkpoint is lost for this shard and its next snapshot is a base.
  // Smaller ones are built in memory and written again after a failure.
  // Never with a peer_replica (the copy is the frame). UINT64_MAX: never.
  uint64_t stream_above_bytes = UINT64_MAX;
  // The job's seed: with tables, a row's initial value is the model's
  // initial_rows(seed, table, key); a node binds its row source to it.
  uint64_t seed = 0;
  uint64_t epoch = 0;                // this incarnation's fencing epoch (0: unfenced)
  // The run its snapshots belong to (storage/run_identity.hpp): every
  // snapshot it takes carries them.
  std::string run_id;
  std::string config_hash;
  // Peer copies (actors/ps/snapshot_replica.hpp; invalid: none). Each
  // written file's frame is sent to `peer_replica` (the replica of the node
  // a restart of this shard goes to when its node dies), fire-and-forget. A
  // restore asks `restore_replica` (the one its previous incarnation sent
  // to) first for each file of the chain, checks every byte of a copy as it
  // would the file's, and reads the directory for any file it misses.
  caf::actor peer_replica;
  caf::actor restore_replica;
};

// What this process gives its shard beside the config.
struct parameter_shard_env {
  std::shared_ptr<link_faults> faults;  // message faults on this shard's links (may be null)
  std::shared_ptr<file_io> io;          // the file system it reads and writes (null: the real one)
  // The model's initial rows bound to the job's seed: needed (and only
  // used) when the shard's config has embedding tables.
  table_row_source table_rows;
  // This process's replica store, read directly when restore_replica is its
  // actor (no message, no copy). Null: none here.
  std::shared_ptr<const replica_store> local_replica;
  // This node's shards restored ahead of their moves here
  // (shard_standby.hpp): a start whose newest ref is one of them takes it
  // instead of reading the chain again. Null: none.
  std::shared_ptr<shard_standby_store> standby;
};

// The row source of a shard with tables: `m`'s initial_rows bound to `seed`,
// one key at a time (the shard checks table and dim before it asks).
table_row_source model_table_rows(std::shared_ptr<const model> m, uint64_t seed);

// Spawns a shard; fails (naming the tensor) when the snapshot does not fit
// the configuration.
caf::expected<caf::actor> spawn_parameter_shard(caf::actor_system& sys, parameter_shard_config cfg,
                                                parameter_shard_env env = {});

// The field orders are the wire format; the initial values cross as their
// bits (messages/wire_bits.hpp).
template <class I>
typename I::result_type inspect(I& f, chain_link& x) {
  return f(caf::meta::type_name("keel.chain_link"), x.checkpoint, x.file, x.bytes, x.crc32c);
}

template <class I>
typename I::result_type inspect(I& f, manifest_entry& x) {
  return f(caf::meta::type_name("keel.manifest_entry"), x.shard, x.file, x.bytes, x.crc32c, x.write_us,
           x.write_cpu_us, x.chain);
}

template <class I>
typename I::result_type inspect(I& f, snapshot_ref& x) {
  return f(caf::meta::type_name("keel.snapshot_ref"), x.dir, x.checkpoint, x.step, x.entry, x.run_id,
           x.config_hash);
}

template <class I>
typename I::result_type inspect(I& f, parameter_shard_config& x) {
  return f(caf::meta::type_name("keel.parameter_shard_config"), x.core,
           wire::float_vector_bits{x.initial_dense}, x.restore_from, x.snapshot_every_steps,
           x.directory, x.checkpoint_dir, x.retry_min, x.retry_max, x.chain.full_every, x.chain.delta_fraction, x.stream_above_bytes, x.seed,
           x.epoch, x.run_id, x.config_hash, x.peer_replica, x.restore_replica);
}

}  // namespace keel
