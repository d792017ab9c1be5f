#pragma once
// An actor_id names one actor of a job by what it is and which one: a shard
// or a worker with its index, the checkpointer, the directory, the three
// supervisors (root, shards, workers), and in a cluster a node process with
// its index. A link_id names the direction messages travel between two of
// them (worker:0 > shard:1). Both are plain values: comparable, hashable,
// inspectable (they cross processes in spawn requests), and what the job,
// the cluster, the faults and the metrics pass around and dispatch on.
//
// Their text ("shard:3", "checkpointer", "worker:0>shard:1") is for the
// edges only: CLI flags and output, the JSON report, event text, metrics
// label values, and the supervision tree's child ids and directory names.
// Those stay strings because supervision/ is a library of its own that knows
// nothing of keel's actors; keel converts with to_string when it builds the
// tree and with parse_actor_id where a name comes back from it.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <caf/meta/type_name.hpp>

namespace keel {

enum class actor_kind : uint8_t { shard, worker, checkpointer, directory, root, shards, workers, node };

// The kind as a name prints it ("shard"); an out-of-range value (bytes from
// a peer) prints as "actor_kind(N)".
std::string to_string(actor_kind k);

struct actor_id {
  actor_kind kind = actor_kind::root;
  uint32_t index = 0;  // shard, worker, node: which one; 0 for the others

  static constexpr actor_id shard(uint32_t i) { return {actor_kind::shard, i}; }
  static constexpr actor_id worker(uint32_t i) { return {actor_kind::worker, i}; }
  static constexpr actor_id node(uint32_t i) { return {actor_kind::node, i}; }
  static constexpr actor_id checkpointer() { return {actor_kind::checkpointer, 0}; }
  static constexpr actor_id directory() { return {actor_kind::directory, 0}; }
  static constexpr actor_id root() { return {actor_kind::root, 0}; }
  static constexpr actor_id shards() { return {actor_kind::shards, 0}; }
  static constexpr actor_id workers() { return {actor_kind::workers, 0}; }

  // Whether the kind comes with an index (shard, worker, node).
  bool indexed() const {
    return kind == actor_kind::shard || kind == actor_kind::worker || kind == actor_kind::node;
  }
  bool is(actor_kind k) const { return kind == k; }

  friend bool operator==(actor_id a, actor_id b) { return a.kind == b.kind && a.index == b.index; }
  friend bool operator!=(actor_id a, actor_id b) { return !(a == b); }
  friend bool operator<(actor_id a, actor_id b) {
    return a.kind != b.kind ? a.kind < b.kind : a.index < b.index;
  }
};

// "shard:3", "worker:0", "node:1"; "checkpointer", "directory", "root",
// "shards", "workers".
std::string to_string(actor_id id);

// The inverse of to_string; empty for any other text (no sign, no leading
// '+', no index beyond 32 bits, no index on an unindexed kind).
std::optional<actor_id> parse_actor_id(std::string_view text);

struct link_id {
  actor_id from;
  actor_id to;

  friend bool operator==(const link_id& a, const link_id& b) { return a.from == b.from && a.to == b.to; }
  friend bool operator!=(const link_id& a, const link_id& b) { return !(a == b); }
  friend bool operator<(const link_id& a, const link_id& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  }
};

// "worker:0>shard:1".
std::string to_string(const link_id& l);
// The inverse of to_string; empty for any other text.
std::optional<link_id> parse_link_id(std::string_view text);

template <class I>
typename I::result_type inspect(I& f, actor_id& x) {
  return f(caf::meta::type_name("keel.actor_id"), x.kind, x.index);
}
template <class I>
typename I::result_type inspect(I& f, link_id& x) {
  return f(caf::meta::type_name("keel.link_id"), x.from, x.to);
}

}  // namespace keel

template <>
struct std::hash<keel::actor_id> {
  size_t operator()(keel::actor_id id) const noexcept {
    return std::hash<uint64_t>{}(uint64_t{static_cast<uint8_t>(id.kind)} << 32 | id.index);
  }
};

template <>
struct std::hash<keel::link_id> {
  size_t operator()(const keel::link_id& l) const noexcept {
    auto h = std::hash<keel::actor_id>{};
    return h(l.from) * 31 + h(l.to);
  }
};
