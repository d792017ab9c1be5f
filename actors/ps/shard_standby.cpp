#include "actors/ps/shard_standby.hpp"

#include <algorithm>

#include <caf/deep_to_string.hpp>

#include "messages/buffer_pool.hpp"
#include "messages/errors.hpp"

namespace keel {

caf::expected<uint64_t> shard_standby_store::prepare(const parameter_shard_config& cfg,
                                                     const parameter_shard_env& env) {
  if (cfg.restore_from.empty())
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.core.shard) +
                                                ": a pre-copy needs the checkpoint to restore from");
  auto& ref = cfg.restore_from.front();
  if (ref.run_id != cfg.run_id)
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.core.shard) +
                                                ": a pre-copy of another run's checkpoint (" + ref.run_id + ")");
  auto io = env.io ? env.io : posix_io();
  auto memory = buffer_pool::create();
  standby s;
  s.run_id = cfg.run_id;
  s.config_hash = cfg.config_hash;
  s.config = caf::deep_to_string(cfg.core);
  s.shard = cfg.core.shard;
  s.links = chain_files(ref);
  auto read = [&](size_t i) { return read_chain_link(*io, ref, i, *memory, verify_mode::payload); };
  auto restored = restore_chain_state(cfg.core, s.links.size(), read, verify_mode::structure, env.table_rows);
  if (!restored)
    return std::move(restored.error());
  s.restored = std::move(*restored);
  for (auto& l : s.links) s.bytes += l.bytes;
  const uint64_t bytes = s.bytes;
  std::lock_guard<std::mutex> guard(mtx_);
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(),
                             [&](const standby& k) { return k.run_id == s.run_id && k.shard == s.shard; }),
              kept_.end());
  kept_.push_back(std::move(s));
  while (kept_.size() > capacity_) kept_.pop_front();
  return bytes;
}

std::optional<shard_start> shard_standby_store::take(const parameter_shard_config& cfg,
                                                     const parameter_shard_env& env, std::string& said) {
  if (cfg.restore_from.empty())
    return std::nullopt;
  standby s;
  {
    std::lock_guard<std::mutex> guard(mtx_);
    auto it = std::find_if(kept_.begin(), kept_.end(), [&](const standby& k) {
      return k.run_id == cfg.run_id && k.shard == cfg.core.shard;
    });
    if (it == kept_.end())
      return std::nullopt;
    s = std::move(*it);
    kept_.erase(it);
  }
  auto& ref = cfg.restore_from.front();
  auto links = chain_files(ref);
  const auto kept = "its pre-copy of checkpoint " + std::to_string(s.links.back().checkpoint);
  if (s.config_hash != cfg.config_hash || ref.run_id != cfg.run_id || s.config != caf::deep_to_string(cfg.core)) {
    said = kept + " is of another configuration; restoring checkpoint " + std::to_string(ref.checkpoint);
    return std::nullopt;
  }
  if (!chain_starts_with(links, s.links)) {
    const auto newest = std::to_string(ref.checkpoint);
    said = kept +
           (chain_starts_with(s.links, links)
              ? " is newer than checkpoint " + newest + ", the one to restore"
              : " is not in checkpoint " + newest + "'s chain (" +
                  (links.size() == 1 ? "a new base" : "another chain") + ")") +
           "; restoring checkpoint " + newest;
    return std::nullopt;
  }
  const size_t newer = links.size() - s.links.size();
  if (newer > 0) {
    auto io = env.io ? env.io : posix_io();
    auto memory = buffer_pool::create();
    auto read = [&](size_t i) { return read_chain_link(*io, ref, i, *memory, verify_mode::payload); };
    if (auto err = extend_chain_state(cfg.core, s.restored, s.links.size(), links.size(), read,
                                      verify_mode::structure)) {
      said = kept + " did not extend to " + std::to_string(ref.checkpoint) + ": " + describe(err);
      return std::nullopt;
    }
  }
  auto core = shard_core::restored(cfg.core, std::move(s.restored.state), env.table_rows);
  if (!core) {
    said = "its pre-copy does not fit: " + describe(core.error());
    return std::nullopt;
  }
  said = "took " + kept +
         (newer > 0 ? " and " + std::to_string(newer) + (newer == 1 ? " newer delta" : " newer deltas") : "");
  {
    std::lock_guard<std::mutex> guard(mtx_);
    ++taken_;
  }
  return shard_start{std::move(*core), std::move(links)};
}

size_t shard_standby_store::size() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return kept_.size();
}

uint64_t shard_standby_store::taken() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return taken_;
}

uint64_t shard_standby_store::bytes() const {
  std::lock_guard<std::mutex> guard(mtx_);
  uint64_t b = 0;
  for (auto& k : kept_) b += k.bytes;
  return b;
}

}  // namespace keel
