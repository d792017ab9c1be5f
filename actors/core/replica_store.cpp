#include "actors/core/replica_store.hpp"

#include <algorithm>

namespace keel {

bool replica_store::keep(const std::string& job, uint32_t shard, const chain_link& file,
                         const std::vector<chain_link>& chain, shard_snapshot_msg frame) {
  if (frame.empty())
    return false;
  std::lock_guard<std::mutex> guard(mtx_);
  auto& held = shards_[shard];
  for (auto& k : held)
    if (k.job == job && k.link.checkpoint > file.checkpoint)
      return false;  // a newer file came first: this one is superseded already
  auto named = [&](const kept& k) {
    return k.job == job && (k.link == file || std::find(chain.begin(), chain.end(), k.link) != chain.end());
  };
  auto gone = std::remove_if(held.begin(), held.end(), [&](const kept& k) { return !named(k); });
  for (auto it = gone; it != held.end(); ++it) bytes_ -= it->bytes;
  held.erase(gone, held.end());
  if (std::any_of(held.begin(), held.end(), [&](const kept& k) { return k.link == file; }))
    return true;  // kept already (a write of the same file reported again)
  uint64_t n = frame.frame()->size_words() * sizeof(capnp::word);
  held.push_back({job, file, std::move(frame), n});
  bytes_ += n;
  peak_ = std::max(peak_, bytes_);
  return true;
}

std::optional<shard_snapshot_msg> replica_store::find(const std::string& name, uint64_t bytes,
                                                      uint32_t crc32c) const {
  std::lock_guard<std::mutex> guard(mtx_);
  for (auto& [key, held] : shards_)
    for (auto& k : held)
      if (k.link.file == name && k.link.bytes == bytes && k.link.crc32c == crc32c)
        return k.frame;
  return std::nullopt;
}

uint64_t replica_store::bytes() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return bytes_;
}

uint64_t replica_store::peak_bytes() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return peak_;
}

size_t replica_store::files() const {
  std::lock_guard<std::mutex> guard(mtx_);
  size_t n = 0;
  for (auto& [key, held] : shards_) n += held.size();
  return n;
}

}  // namespace keel
