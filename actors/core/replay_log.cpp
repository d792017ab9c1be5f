#include "actors/core/replay_log.hpp"

namespace keel {

void replay_log::append(uint32_t shard, uint64_t seq, push_msg push) {
  logs_.at(shard).insert_or_assign(seq, std::move(push));
}

void replay_log::truncate(uint32_t shard, uint64_t covered) {
  auto& log = logs_.at(shard);
  log.erase(log.begin(), log.upper_bound(covered));
}

std::vector<push_msg> replay_log::after(uint32_t shard, uint64_t after) const {
  std::vector<push_msg> out;
  auto& log = logs_.at(shard);
  for (auto it = log.upper_bound(after); it != log.end(); ++it)
    out.push_back(it->second);
  return out;
}

uint64_t replay_log::first_seq(uint32_t shard) const {
  auto& log = logs_.at(shard);
  return log.empty() ? 0 : log.begin()->first;
}

size_t replay_log::size() const {
  size_t n = 0;
  for (auto& log : logs_)
    n += log.size();
  return n;
}

size_t replay_log::bytes() const {
  size_t n = 0;
  for (auto& log : logs_)
    for (auto& [seq, m] : log)
      n += m.empty() ? 0 : m.frame()->size_words() * sizeof(capnp::word);
  return n;
}

void replay_log::clear() {
  for (auto& log : logs_)
    log.clear();
}

}  // namespace keel
