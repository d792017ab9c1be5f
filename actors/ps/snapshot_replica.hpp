#pragma once
// A snapshot_replica is the actor in front of a node's replica_store
// (actors/core/replica_store.hpp): the in-memory copies of the newest
// checkpoint chain of each shard whose peer this node is (the node a
// restart of the shard goes to when the shard's node dies). It answers
//   (replica_keep_atom, job, shard, file, chain, frame)  one way: keep it
//   (replica_fetch_atom, name, bytes, crc32c) -> shard_snapshot_msg, or
//                                  errc::not_found naming the file
// where `job` is the shard's run id: a shard's copies of another run (the
// next job, a resume) replace its older run's (replica_store.hpp), so a
// node holds at most one chain per shard index. A shard sends its copies
// fire-and-forget; a copy served is checked by the
// one restoring from it (check_chain_link_copy), never by the replica. The
// store may be read directly by a shard starting in the same process
// (restore_copy below), which is how a restart on the peer reads no network
// and no disk. It stops with its owner (the node agent, or the job in one
// process).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/atom.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/core/replica_store.hpp"

namespace keel {

using replica_keep_atom = caf::atom_constant<caf::atom("rep_keep")>;
using replica_fetch_atom = caf::atom_constant<caf::atom("rep_fetch")>;

caf::actor spawn_snapshot_replica(caf::actor_system& sys, std::shared_ptr<replica_store> store);

// The copy of `link` that `replica` holds: read straight from `local` when
// `replica` is this process's (it is the actor in front of `local`), else
// asked for with `timeout`. Errors: not_found (no such copy, no replica),
// or the request's failure (the replica's node is down, the timeout).
caf::expected<shard_snapshot_msg> fetch_replica_copy(caf::actor_system& sys, const caf::actor& replica,
                                                     const replica_store* local, const chain_link& link,
                                                     std::chrono::milliseconds timeout);

}  // namespace keel
