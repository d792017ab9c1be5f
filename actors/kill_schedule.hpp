#pragma once
// A kill schedule says which actors to kill at which training step, as the
// CLI's --kill flag spells it: "shard:0@step=40,worker:1@step=90,
// checkpointer@step=120,shards@step=60". Names are directory names (shard:N,
// worker:N, checkpointer) or supervisor names (root, shards, workers). A
// kill fires once, when every worker has completed that many steps.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace keel {

struct kill_spec {
  std::string actor;
  uint64_t at_step = 0;
};

// Parses a comma-separated list; an error names the bad item and why.
caf::expected<std::vector<kill_spec>> parse_kill_schedule(const std::string& text);

std::string to_string(const std::vector<kill_spec>& schedule);

}  // namespace keel
