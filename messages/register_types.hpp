#pragma once
// Registers every protocol message type with an actor system's config, so
// CAF's middleman can carry them between processes. Call it on every node
// before constructing the actor_system; a type missing on either side
// arrives as an empty message (CAF017.md, gotcha 5).

namespace caf {
class actor_system_config;
}

namespace keel {

void register_message_types(caf::actor_system_config& cfg);

}  // namespace keel
