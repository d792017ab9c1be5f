#pragma once
// The consistency rule under which a shard serves pulls. BSP: a pull at
// clock c waits until the shard has applied steps 0..c-1 of every worker.
// SSP(s): a pull at clock c waits until every worker has pushed step c-s-1.
// ASP: a pull is served at once. The rule is shard-local (DESIGN.md).

#include <cstdint>
#include <string>

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>

namespace keel {

enum class consistency_kind { bsp, ssp, asp };

struct consistency {
  consistency_kind kind = consistency_kind::bsp;
  uint32_t staleness = 0;  // SSP's bound s
};

template <class I>
typename I::result_type inspect(I& f, consistency& x) {
  return f(caf::meta::type_name("keel.consistency"), x.kind, x.staleness);
}

// Parses "bsp", "asp" or "ssp:S" (S a non-negative integer).
caf::expected<consistency> parse_consistency(const std::string& text);
std::string to_string(const consistency& c);

}  // namespace keel
