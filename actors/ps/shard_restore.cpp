// Where a restarted shard starts (shard_restore.hpp): the newest ref whose
// chain validates, read on this node one file at a time.
#include "actors/ps/shard_restore.hpp"

#include <cstdio>
#include <set>
#include <string>

#include "actors/core/shard_delta.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

// Restores from `ref`'s chain, one file at a time (every byte of each
// checked once, its payload CRC) into `memory`. A file found bad (as
// recorded: name, size and CRC) goes into `bad`, so no older ref whose chain
// holds it is tried.
caf::expected<shard_start> restore_ref(const parameter_shard_config& cfg, const parameter_shard_env& env,
                                       file_io& io, const snapshot_ref& ref, buffer_pool& memory,
                                       std::set<std::string>& bad) {
  auto links = ref.entry.chain;
  links.push_back({ref.checkpoint, ref.entry.file, ref.entry.bytes, ref.entry.crc32c});
  auto key = [](const chain_link& l) { return l.file + "/" + std::to_string(l.bytes) + "/" + std::to_string(l.crc32c); };
  for (auto& l : links)
    if (bad.count(key(l)) != 0)
      return make_error(errc::damaged_snapshot, "its chain holds " + l.file + ", found damaged above");
  size_t at = 0;
  auto read = [&](size_t i) {
    at = i;
    return read_chain_link(io, ref, i, memory, verify_mode::payload);
  };
  auto core = restore_chain(cfg.core, links.size(), read, verify_mode::structure, env.table_rows);
  if (!core) {
    bad.insert(key(links[at]));
    return core.error();
  }
  // A chain of another run (not this run's files) is not extended.
  if (ref.run_id != cfg.run_id)
    links.clear();
  return shard_start{std::move(*core), std::move(links)};
}

}  // namespace

// The shard's starting core: from the first of cfg.restore_from whose chain
// validates, else from cfg.snapshot, else fresh.
// `memory` is the pool the shard's snapshots will use: a file restored from
// is read into it, so the next snapshot reuses that buffer's pages instead
// of a second one staying mapped beside it.
caf::expected<shard_start> starting_core(parameter_shard_config& cfg, const parameter_shard_env& env,
                                   buffer_pool& memory) {
  if (!cfg.restore_from.empty()) {
    auto io = env.io ? env.io : posix_io();
    std::string why;
    std::set<std::string> bad;
    for (auto& ref : cfg.restore_from) {
      auto restored = restore_ref(cfg, env, *io, ref, memory, bad);
      if (restored) {
        if (!why.empty())  // fell back past a damaged file: said loudly
          std::fprintf(stderr, "keel: shard %u restored from checkpoint %llu after skipping: %s\n", cfg.core.shard,
                       static_cast<unsigned long long>(ref.checkpoint), why.c_str());
        return restored;
      }
      why += (why.empty() ? "" : "; ") + ("checkpoint " + std::to_string(ref.checkpoint) + ": ") +
             describe(restored.error());
    }
    auto none = "shard " + std::to_string(cfg.core.shard) + " has no snapshot to restore from: " + why;
    if (cfg.initial_dense.size() != cfg.core.dense.size())
      return make_error(errc::damaged_snapshot, none);
    // As a supervisor does when no snapshot validates: a fresh start (whose
    // missing pushes then call for a rollback), said loudly.
    std::fprintf(stderr, "keel: %s; starting fresh\n", none.c_str());
  }
  caf::expected<shard_core> core{shard_core{}};
  if (!cfg.snapshot.empty()) {
    auto snap = decode(cfg.snapshot);
    if (!snap)
      return snap.error();
    core = restore_shard(cfg.core, snap->root(),
                         env.snapshot_crcs_checked ? verify_mode::structure : verify_mode::checksums, env.table_rows);
  } else {
    core = shard_core::make(cfg.core, std::move(cfg.initial_dense), env.table_rows);
  }
  if (!core)
    return core.error();
  return shard_start{std::move(*core), {}};
}


}  // namespace keel
