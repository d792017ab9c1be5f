#include "actors/ps/snapshot_replica.hpp"

#include <caf/all.hpp>

#include "actors/ps/parameter_shard.hpp"  // inspect(chain_link)
#include "messages/errors.hpp"

namespace keel {

namespace {

struct replica_state {
  std::shared_ptr<replica_store> store;
  static inline const char* name = "keel.snapshot_replica";
};

using replica_actor = caf::stateful_actor<replica_state>;

caf::behavior snapshot_replica(replica_actor* self, std::shared_ptr<replica_store> store) {
  self->state.store = std::move(store);
  return {
    [self](replica_keep_atom, const std::string& job, uint32_t shard, const chain_link& file,
           const std::vector<chain_link>& chain, shard_snapshot_msg& frame) {
      self->state.store->keep(job, shard, file, chain, std::move(frame));
    },
    [self](replica_fetch_atom, const std::string& name, uint64_t bytes,
           uint32_t crc32c) -> caf::result<shard_snapshot_msg> {
      if (auto copy = self->state.store->find(name, bytes, crc32c))
        return std::move(*copy);
      return make_error(errc::not_found, name + ": no copy in this node's memory");
    },
  };
}

}  // namespace

caf::actor spawn_snapshot_replica(caf::actor_system& sys, std::shared_ptr<replica_store> store) {
  return sys.spawn(snapshot_replica, std::move(store));
}

caf::expected<shard_snapshot_msg> fetch_replica_copy(caf::actor_system& sys, const caf::actor& replica,
                                                     const replica_store* local, const chain_link& link,
                                                     std::chrono::milliseconds timeout) {
  if (!replica)
    return make_error(errc::not_found, link.file + ": no peer replica");
  if (local != nullptr && replica.node() == sys.node()) {
    if (auto copy = local->find(link.file, link.bytes, link.crc32c))
      return std::move(*copy);
    return make_error(errc::not_found, link.file + ": no copy in this node's memory");
  }
  caf::expected<shard_snapshot_msg> out = make_error(errc::not_found, link.file + ": no answer");
  caf::scoped_actor asker{sys};
  asker->request(replica, timeout, replica_fetch_atom::value, link.file, link.bytes, link.crc32c)
    .receive([&](shard_snapshot_msg& copy) { out = std::move(copy); },
             [&](caf::error& err) { out = std::move(err); });
  return out;
}

}  // namespace keel
