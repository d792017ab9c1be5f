#include "messages/register_types.hpp"

#include <caf/actor_system_config.hpp>

#include "messages/errors.hpp"
#include "messages/protocol.hpp"

namespace keel {

namespace {

template <class... S>
void add_all(caf::actor_system_config& cfg) {
  (cfg.add_message_type<msg<S>>(schema_name<S>::value), ...);
}

}  // namespace

void register_message_types(caf::actor_system_config& cfg) {
  add_all<schema::Push, schema::PushAck, schema::PullRequest, schema::PullReply,
          schema::SnapshotRequest, schema::ShardSnapshot, schema::CheckpointManifest,
          schema::DirectoryUpdate, schema::Heartbeat, schema::NodeJoin>(cfg);
  cfg.add_error_category(error_category(), [](uint8_t code, caf::atom_value, const caf::message& ctx) {
    return describe(caf::error(code, error_category(), ctx));
  });
}

}  // namespace keel
