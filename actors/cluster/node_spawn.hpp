#pragma once
// Turns a spawn_request that arrived from another process into an actor in
// this one. Nothing in the request is trusted: every field is checked first
// and a bad one gives an error naming it (unknown kind, bad config, model
// not found); only a request that passes every check starts anything.

#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/cluster/node_protocol.hpp"
#include "storage/file_io.hpp"

namespace keel {

class client_slots;
class data_plane;
class model;
class replica_store;
class shard_standby_store;

// The models a node built, by their spec (name, data folder, options): a
// restart or a move placed here reuses the model instead of building it
// again (ctr-lr: 75-150 ms of a spawn's 80-500 ms, measured with
// bench/cluster/membership.sh). A model is immutable and shared by the
// actors that use it. Keeps the `capacity` specs used last. Thread-safe.
class model_cache {
 public:
  explicit model_cache(size_t capacity = 2) : capacity_(capacity) {}

  // The model `spec` names (its data_dir, else `data_dir`), built on a miss.
  // Errors: those of building it, which are not kept.
  caf::expected<std::shared_ptr<const model>> get(const model_spec& spec, const std::filesystem::path& data_dir);
  // How many models were built (misses), for tests.
  size_t builds() const;

 private:
  mutable std::mutex mtx_;
  size_t capacity_;
  size_t builds_ = 0;
  std::list<std::pair<std::string, std::shared_ptr<const model>>> models_;  // most recent first
};

// Checks data plane routes from a peer (a count bound; each with a node
// id, a host and a port); the error names `where` and the bad entry.
caf::error check_routes(const std::vector<data_route>& routes, const std::string& where);

// What a node lends the actors it starts: `data_dir` its MNIST folder (for
// a request whose model names none); with a data plane, a shard is served
// on it and a worker uses it (with the request's routes) for its pushes and
// pulls; a shard restoring reads the copies in `replicas` (this node's
// replica store) directly when its restore_replica is this node's replica,
// and takes its pre-copy from `standby` when there is one
// (actors/ps/shard_standby.hpp). Models come from `models` when given,
// else are built for the one request.
struct node_resources {
  std::filesystem::path data_dir;
  std::shared_ptr<data_plane> plane;
  std::shared_ptr<const replica_store> replicas;
  std::shared_ptr<model_cache> models;
  std::shared_ptr<shard_standby_store> standby;
  std::shared_ptr<file_io> io;  // what its shards read and write files with (null: the real file system)
  std::shared_ptr<client_slots> clients;  // a client process's loops (null: a node)
};

// Checks `req` and starts the actor it names. Errors: invalid_argument
// (unknown kind, a field out of range: the text names it), not_found (no
// such model), and whatever the actor's own start reports. A shard with
// embedding tables gets its row source from the request's shard_model built
// here (invalid_argument when it names none or its tables are not the
// config's).
caf::expected<caf::actor> start_requested(caf::actor_system& sys, const spawn_request& req,
                                          const node_resources& node);

// The pre-copy of a shard about to move here: checks `req` (a shard's, its
// restore_from naming the checkpoint to restore) as start_requested would,
// then restores that chain into `node.standby` on the calling thread (keep
// it off an actor's thread). Returns the bytes of the files read. Errors:
// as start_requested's, and the restore's.
caf::expected<uint64_t> prepare_requested(const spawn_request& req, const node_resources& node);

}  // namespace keel
