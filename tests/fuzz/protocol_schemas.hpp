#pragma once
// The ten protocol message types as a list a fuzz input can index: byte 0
// of a message input picks the schema (byte % 10), so one fuzz target and
// one seed corpus cover every decoder of messages/protocol.hpp.

#include <cstddef>
#include <type_traits>

#include "messages/protocol.hpp"

namespace keel::fuzz {

// Names schema struct S without constructing it (capnp structs cannot be).
template <class S>
struct schema_tag {
  using type = S;
};

template <class... S>
struct schema_list {
  static constexpr size_t size = sizeof...(S);
};

using protocol_schemas =
  schema_list<schema::Push, schema::PushAck, schema::PullRequest, schema::PullReply,
              schema::SnapshotRequest, schema::ShardSnapshot, schema::CheckpointManifest,
              schema::DirectoryUpdate, schema::Heartbeat, schema::NodeJoin>;

constexpr size_t protocol_schema_count = protocol_schemas::size;

namespace detail {
template <class F, class... S>
void visit_schema(size_t index, F& f, schema_list<S...>) {
  size_t i = 0;
  static_cast<void>(((i++ == index ? (f(schema_tag<S>{}), true) : false) || ...));
}
}  // namespace detail

// Calls `f(schema_tag<S>{})` for the schema at `index % protocol_schema_count`.
template <class F>
void visit_schema(size_t index, F&& f) {
  detail::visit_schema(index % protocol_schema_count, f, protocol_schemas{});
}

// The index of schema S in protocol_schemas (what byte 0 of an input holds).
template <class S, class... All>
constexpr size_t schema_index(schema_list<All...>) {
  size_t i = 0, found = 0;
  ((std::is_same<S, All>::value ? (found = i, ++i) : ++i), ...);
  return found;
}

template <class S>
constexpr size_t schema_index() {
  return schema_index<S>(protocol_schemas{});
}

}  // namespace keel::fuzz
