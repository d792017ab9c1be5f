#include "actors/core/snapshot_chain.hpp"

#include "messages/errors.hpp"

namespace keel {

void snapshot_chain::restored(std::vector<chain_link> links) {
  taken_.clear();
  written_ = std::move(links);
  tip_failed_ = false;
  tip_length_ = written_.size();
  if (written_.empty()) {
    tip_ = 0;
    return;
  }
  tip_ = written_.back().checkpoint;
  tip_file_ = written_.back().file;
  base_ = written_.front().checkpoint;
  base_bytes_ = written_.front().bytes;
  delta_bytes_ = 0;
  for (size_t i = 1; i < written_.size(); ++i) delta_bytes_ += written_[i].bytes;
}

std::optional<delta_parent> snapshot_chain::next(uint64_t estimate, bool changes_complete) const {
  if (opts_.full_every <= 1 || tip_ == 0 || tip_failed_ || !changes_complete || tip_length_ >= opts_.full_every)
    return std::nullopt;
  if (static_cast<double>(delta_bytes_ + estimate) > opts_.delta_fraction * static_cast<double>(base_bytes_))
    return std::nullopt;
  return delta_parent{tip_file_, tip_, base_};
}

void snapshot_chain::taken(uint64_t id, const std::string& file, uint64_t bytes,
                           const std::optional<delta_parent>& parent) {
  taken_[id] = parent ? std::optional<uint64_t>(parent->checkpoint) : std::nullopt;
  tip_ = id;
  tip_file_ = file;
  tip_failed_ = false;
  if (parent) {
    ++tip_length_;
    delta_bytes_ += bytes;
  } else {
    tip_length_ = 1;
    base_ = id;
    base_bytes_ = bytes;
    delta_bytes_ = 0;
  }
}

caf::expected<std::vector<chain_link>> snapshot_chain::written(uint64_t id, const manifest_entry& e) {
  auto it = taken_.find(id);
  if (it == taken_.end())
    return make_error(errc::invalid_argument, "snapshot " + std::to_string(id) + " was not taken by this shard");
  auto parent = it->second;
  // Writes complete in order: nothing older is still on its way.
  taken_.erase(taken_.begin(), std::next(it));
  chain_link self{id, e.file, e.bytes, e.crc32c};
  if (id == tip_)
    tip_failed_ = false;  // written after all (again, after a failure)
  if (!parent) {
    written_ = {self};
    return std::vector<chain_link>{};
  }
  if (written_.empty() || written_.back().checkpoint != *parent) {
    if (id == tip_)
      tip_failed_ = true;
    return make_error(errc::damaged_snapshot, e.file + " is a delta on checkpoint " + std::to_string(*parent) +
                                                ", whose file was not written: it cannot be restored");
  }
  auto chain = written_;
  written_.push_back(self);
  return chain;
}

void snapshot_chain::failed(uint64_t id) {
  if (id == tip_)
    tip_failed_ = true;
}

}  // namespace keel
