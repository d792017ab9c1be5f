#include "shard_state.hpp"

#include <cstring>
#include <vector>

namespace keel::fuzz {

namespace {

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

}  // namespace

bool same_shard_state(const shard_core& a, const shard_core& b) {
  const auto& cfg = a.config();
  if (cfg.num_workers != b.config().num_workers)
    return false;
  if (!same_floats(a.dense(), b.dense()) || !same_floats(a.dense_slot(0), b.dense_slot(0)) ||
      !same_floats(a.dense_slot(1), b.dense_slot(1)))
    return false;
  if (a.sparse().size() != b.sparse().size())
    return false;
  for (auto& [key, entry] : a.sparse()) {
    auto other = b.sparse().find(key);
    if (other == b.sparse().end() || std::memcmp(&entry, &other->second, sizeof(sparse_entry)) != 0)
      return false;
  }
  for (uint32_t w = 0; w < cfg.num_workers; ++w)
    if (a.applied(w) != b.applied(w) || a.received(w) != b.received(w) ||
        a.worker_clock(w) != b.worker_clock(w))
      return false;
  return a.version() == b.version() && a.bsp_clock() == b.bsp_clock() &&
         a.optimizer_steps() == b.optimizer_steps();
}

}  // namespace keel::fuzz
