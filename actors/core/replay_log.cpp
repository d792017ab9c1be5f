#include "actors/core/replay_log.hpp"

#include <algorithm>

namespace keel {

size_t replay_log::bytes_of(const push_msg& m) {
  return m.empty() ? 0 : m.frame()->size_words() * sizeof(capnp::word);
}

void replay_log::append(uint32_t shard, uint64_t seq, push_msg push) {
  auto& log = logs_.at(shard);
  bytes_ += bytes_of(push);
  auto [it, fresh] = log.try_emplace(seq);
  if (!fresh)
    bytes_ -= bytes_of(it->second);
  it->second = std::move(push);
  peak_ = std::max(peak_, bytes_);
}

void replay_log::truncate(uint32_t shard, uint64_t covered) {
  auto& log = logs_.at(shard);
  auto end = log.upper_bound(covered);
  for (auto it = log.begin(); it != end; ++it) bytes_ -= bytes_of(it->second);
  log.erase(log.begin(), end);
}

size_t replay_log::drop_oldest(size_t bound, uint64_t keep) {
  size_t dropped = 0;
  while (bytes_ > bound) {
    uint64_t oldest = keep;
    for (auto& log : logs_)
      if (!log.empty())
        oldest = std::min(oldest, log.begin()->first);
    if (oldest >= keep)
      break;
    for (uint32_t shard = 0; shard < logs_.size(); ++shard) {
      auto& log = logs_[shard];
      if (!log.empty() && log.begin()->first == oldest) {
        bytes_ -= bytes_of(log.begin()->second);
        log.erase(log.begin());
        ++dropped;
      }
    }
  }
  return dropped;
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

void replay_log::clear() {
  for (auto& log : logs_)
    log.clear();
  bytes_ = 0;
}

}  // namespace keel
