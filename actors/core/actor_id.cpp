#include "actors/core/actor_id.hpp"

#include <array>

namespace keel {

namespace {

constexpr std::array<const char*, 8> kind_names = {"shard", "worker", "checkpointer", "directory",
                                                   "root",  "shards", "workers",      "node"};

// A decimal index without sign or leading '+', below 2^32.
std::optional<uint32_t> parse_index(std::string_view s) {
  if (s.empty() || s.size() > 10)
    return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX)
    return std::nullopt;
  return static_cast<uint32_t>(v);
}

}  // namespace

std::string to_string(actor_kind k) {
  auto i = static_cast<size_t>(k);
  if (i < kind_names.size())
    return kind_names[i];
  return "actor_kind(" + std::to_string(i) + ")";
}

std::string to_string(actor_id id) {
  if (id.indexed())
    return to_string(id.kind) + ":" + std::to_string(id.index);
  return to_string(id.kind);
}

std::optional<actor_id> parse_actor_id(std::string_view text) {
  auto colon = text.find(':');
  auto name = text.substr(0, colon);
  for (size_t i = 0; i < kind_names.size(); ++i) {
    if (name != kind_names[i])
      continue;
    actor_id id{static_cast<actor_kind>(i), 0};
    if (!id.indexed())
      return colon == std::string_view::npos ? std::optional<actor_id>(id) : std::nullopt;
    if (colon == std::string_view::npos)
      return std::nullopt;
    auto index = parse_index(text.substr(colon + 1));
    if (!index)
      return std::nullopt;
    id.index = *index;
    return id;
  }
  return std::nullopt;
}

std::string to_string(const link_id& l) {
  return to_string(l.from) + ">" + to_string(l.to);
}

std::optional<link_id> parse_link_id(std::string_view text) {
  auto gt = text.find('>');
  if (gt == std::string_view::npos)
    return std::nullopt;
  auto from = parse_actor_id(text.substr(0, gt));
  auto to = parse_actor_id(text.substr(gt + 1));
  if (!from || !to)
    return std::nullopt;
  return link_id{*from, *to};
}

}  // namespace keel
