#pragma once
// Which row a full embedding table evicts to make room for a new one
// (actors/core/embedding_table.hpp states each rule exactly). A plain value
// with no CAF in it: tables hold one in their table_config, a job in its
// table_limits (actors/core/table_limits.hpp).
//  - least_recently_updated (lru): the row whose last update is oldest;
//  - least_frequently_updated (lfu): the row updated by the fewest pushes,
//    of those the least recently updated.

#include <optional>
#include <string>

namespace keel {

enum class eviction_policy { least_recently_updated, least_frequently_updated };

// "lru" or "lfu": the flag's spelling (--table-eviction).
inline const char* to_string(eviction_policy p) {
  return p == eviction_policy::least_frequently_updated ? "lfu" : "lru";
}

// "least recently updated" or "least frequently updated": for messages.
inline const char* long_name(eviction_policy p) {
  return p == eviction_policy::least_frequently_updated ? "least frequently updated"
                                                        : "least recently updated";
}

// Parses "lru" or "lfu"; nothing for any other text.
inline std::optional<eviction_policy> parse_eviction_policy(const std::string& text) {
  if (text == "lru")
    return eviction_policy::least_recently_updated;
  if (text == "lfu")
    return eviction_policy::least_frequently_updated;
  return std::nullopt;
}

}  // namespace keel
