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
// Every `snapshot_every_steps` complete BSP steps it sends a snapshot, taken
// at that step boundary, straight to the checkpointer, so every shard of a
// checkpoint holds the same step. It finds the checkpointer by watching its
// name in `directory`; it keeps its newest snapshot and sends it again to a
// new checkpointer incarnation (the old one may have died holding it), and
// holds it while no checkpointer is up. It starts from `snapshot` when given
// one (a restart; the caller has validated it), else from `initial_dense`.
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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/core/shard_core.hpp"
#include "messages/protocol.hpp"
#include "messages/wire_bits.hpp"

namespace keel {

class link_faults;

struct parameter_shard_config {
  shard_config core;                 // the shard_core's keys, rule and optimizer
  std::vector<float> initial_dense;  // core.dense.size() values, used without a snapshot
  shard_snapshot_msg snapshot;       // restart from this snapshot when not empty
  uint64_t snapshot_every_steps = 0; // 0: snapshots only on request
  caf::actor directory;              // where it finds "checkpointer" (may be invalid: no snapshots)
  uint64_t epoch = 0;                // this incarnation's fencing epoch (0: unfenced)
  // The run its snapshots belong to (storage/run_identity.hpp): every
  // snapshot it takes carries them.
  std::string run_id;
  std::string config_hash;
};

// What this process gives its shard beside the config.
struct parameter_shard_env {
  // The snapshot's CRCs were checked already (a supervisor's validator ran
  // check_shard_snapshot on this very frame, which is immutable): the
  // restore skips that pass. Never set for bytes from another process.
  bool snapshot_crcs_checked = false;
  std::shared_ptr<link_faults> faults;  // message faults on this shard's links (may be null)
  // The model's initial rows bound to the job's seed: needed (and only
  // used) when the shard's config has embedding tables.
  table_row_source table_rows;
};

// Spawns a shard; fails (naming the tensor) when the snapshot does not fit
// the configuration.
caf::expected<caf::actor> spawn_parameter_shard(caf::actor_system& sys, parameter_shard_config cfg,
                                                parameter_shard_env env = {});

// The field order is the wire format; the initial values cross as their
// bits (messages/wire_bits.hpp).
template <class I>
typename I::result_type inspect(I& f, parameter_shard_config& x) {
  return f(caf::meta::type_name("keel.parameter_shard_config"), x.core,
           wire::float_vector_bits{x.initial_dense}, x.snapshot, x.snapshot_every_steps, x.directory, x.epoch,
           x.run_id, x.config_hash);
}

}  // namespace keel
