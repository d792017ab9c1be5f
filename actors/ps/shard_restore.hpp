#pragma once
// Where a parameter shard starts (parameter_shard.hpp says the rules): from
// the first of its config's restore_from refs whose chain of checkpoint
// files validates, read one file at a time on this node into `memory` (the
// pool its snapshots then use; each file from a peer's in-memory copy
// where its config names a replica that holds one: actors/ps/snapshot_replica.hpp),
// else from its in-memory snapshot, else fresh. Internal to the shard actor.

#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/core/shard_core.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "messages/buffer_pool.hpp"

namespace keel {

// The core a shard starts with, and the chain of the file it restored from
// (its next snapshot may be a delta on it; empty: a base).
struct shard_start {
  shard_core core;
  std::vector<chain_link> chain;
};

// `sys` is the process's actor system: a replica in another process is
// asked through it.
caf::expected<shard_start> starting_core(caf::actor_system& sys, parameter_shard_config& cfg,
                                         const parameter_shard_env& env, buffer_pool& memory);

}  // namespace keel
