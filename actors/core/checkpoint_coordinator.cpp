#include "actors/core/checkpoint_coordinator.hpp"

#include <string>

namespace keel {

void committed_snapshots::add(uint64_t checkpoint, const std::vector<committed_shard>& shards) {
  std::vector<std::optional<snapshot_ref>> by_shard;
  for (auto& s : shards) {
    if (s.shard >= by_shard.size())
      by_shard.resize(s.shard + 1);
    by_shard[s.shard] = s.snapshot;
  }
  std::lock_guard<std::mutex> guard(mtx_);
  newest_first_.emplace_front(checkpoint, std::move(by_shard));
  while (newest_first_.size() > keep_)
    newest_first_.pop_back();
}

std::vector<supervision::snapshot> committed_snapshots::for_shard(uint32_t shard) const {
  std::lock_guard<std::mutex> guard(mtx_);
  std::vector<supervision::snapshot> out;
  for (auto& [id, refs] : newest_first_)
    if (shard < refs.size() && refs[shard])
      out.push_back(supervision::snapshot::of<snapshot_ref>("checkpoint-" + std::to_string(id),
                                                            std::make_shared<const snapshot_ref>(*refs[shard])));
  return out;
}

void committed_snapshots::clear() {
  std::lock_guard<std::mutex> guard(mtx_);
  newest_first_.clear();
}

checkpoint_coordinator::checkpoint_coordinator(uint64_t every, std::chrono::milliseconds timeout)
    : every_(every), timeout_(timeout) {}

bool checkpoint_coordinator::committed(uint64_t checkpoint, uint64_t step,
                                       const std::vector<committed_shard>& shards) {
  snapshots_->add(checkpoint, shards);
  return given_up(step);
}

bool checkpoint_coordinator::given_up(uint64_t step) {
  if (step <= released_)
    return false;
  released_ = step;
  stalled_since_.reset();
  return true;
}

std::optional<uint64_t> checkpoint_coordinator::watch(uint64_t slowest_step,
                                                      clock::time_point now) {
  if (every_ == 0 || slowest_step < window()) {
    stalled_since_.reset();
    return std::nullopt;
  }
  if (!stalled_since_) {
    stalled_since_ = now;
    return std::nullopt;
  }
  if (now - *stalled_since_ < timeout_)
    return std::nullopt;
  stalled_since_.reset();
  return released_ + every_;
}

std::optional<checkpoint_coordinator::clock::time_point> checkpoint_coordinator::next_deadline()
  const {
  if (!stalled_since_)
    return std::nullopt;
  return *stalled_since_ + timeout_;
}

void checkpoint_coordinator::rolled_back(uint64_t step) {
  released_ = step;
  stalled_since_.reset();
  snapshots_->clear();
}

}  // namespace keel
