#pragma once
// The parameter_shard actor: a shard_core behind CAF messages. It answers
//   push_msg                  -> push_ack_msg (applied, accepted, duplicate,
//                                rejected or outOfOrder: bad input is
//                                rejected with a reason, never a crash)
//   pull_request_msg          -> pull_reply_msg once the consistency rule
//                                allows (the reply waits until then)
//   snapshot_request_msg      -> shard_snapshot_msg of its state now
//   (status_atom, worker)     -> (received seq, applied seq, bsp clock)
//   (params_atom)             -> shard_snapshot_msg (the final read-out)
// Every `snapshot_every_steps` complete BSP steps it sends a snapshot, taken
// at that step boundary, straight to the checkpointer, so every shard of a
// checkpoint holds the same step. It finds the checkpointer by watching its
// name in `directory`; it keeps its newest snapshot and sends it again to a
// new checkpointer incarnation (the old one may have died holding it), and
// holds it while no checkpointer is up. It starts from `snapshot` when given one (a restart; the caller
// has validated it), else from `initial_dense`. Pushes, pulls and status
// requests arriving, and acks, pull replies and snapshots leaving, pass
// through the job's link faults (actors/faults/link_faults.hpp).

#include <cstdint>
#include <memory>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/core/shard_core.hpp"

namespace keel {

class link_faults;

struct shard_options {
  shard_config config;
  std::vector<float> initial_dense;  // cfg.dense.size() values, used without a snapshot
  frame_ptr snapshot;                // restart from this snapshot when set
  // The snapshot's CRCs were checked already (a supervisor's validator ran
  // check_shard_snapshot on this very frame, which is immutable): the
  // restore skips that pass. Never set for bytes from another process.
  bool snapshot_crcs_checked = false;
  uint64_t snapshot_every_steps = 0; // 0: snapshots only on request
  caf::actor directory;              // where it finds "checkpointer" (may be invalid: no snapshots)
  std::shared_ptr<link_faults> faults;  // message faults on this shard's links (may be null)
};

// Spawns a shard; fails (naming the tensor) when the snapshot does not fit
// the configuration.
caf::expected<caf::actor> spawn_parameter_shard(caf::actor_system& sys, shard_options opts);

}  // namespace keel
