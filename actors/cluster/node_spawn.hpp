#pragma once
// Turns a spawn_request that arrived from another process into an actor in
// this one. Nothing in the request is trusted: every field is checked first
// and a bad one gives an error naming it (unknown kind, bad config, model
// not found); only a request that passes every check starts anything.

#include <filesystem>
#include <memory>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/cluster/node_protocol.hpp"

namespace keel {

class data_plane;
class replica_store;

// Checks data plane routes from a peer (a count bound; each with a node
// id, a host and a port); the error names `where` and the bad entry.
caf::error check_routes(const std::vector<data_route>& routes, const std::string& where);

// Decodes every capnp frame the request carries with the validating decoder
// (the snapshot of a shard restart). An error here means bad bytes from the
// peer, which the agent treats as misbehaviour, not as a bad config.
caf::error check_request_frames(const spawn_request& req);

// Checks `req` and starts the actor it names. `data_dir` is the node's MNIST
// folder, used when the request's model names none. Errors:
// invalid_argument (unknown kind, a field out of range: the text names it),
// not_found (no such model), and whatever the actor's own start reports.
// A shard with embedding tables gets its row source from the request's
// shard_model built here (invalid_argument when it names none or its
// tables are not the config's).
// With a data plane, a shard is served on it and a worker uses it (with the
// request's routes) for its pushes and pulls. A shard restoring reads the
// copies in `replicas` (this node's replica store) directly when its
// restore_replica is this node's replica.
caf::expected<caf::actor> start_requested(caf::actor_system& sys, const spawn_request& req,
                                          const std::filesystem::path& data_dir,
                                          const std::shared_ptr<data_plane>& plane = nullptr,
                                          const std::shared_ptr<const replica_store>& replicas = nullptr);

}  // namespace keel
