// Where a restarted shard starts (shard_restore.hpp): the newest ref whose
// chain validates, read on this node one file at a time.
#include "actors/ps/shard_restore.hpp"

#include <chrono>
#include <cstdio>
#include <set>
#include <string>

#include "actors/core/shard_delta.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/ps/shard_standby.hpp"
#include "actors/ps/snapshot_replica.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

// Where restore_ref asks first for each file of a chain: a peer's copies in
// memory (snapshot_replica.hpp); and how many files each path served.
struct copy_source {
  caf::actor_system* sys = nullptr;
  caf::actor replica;  // invalid: the directory alone
  const replica_store* local = nullptr;
  size_t from_memory = 0, from_directory = 0;
  std::string missed;  // the first miss or bad copy, for the log
};

// How long a replica in another process has to answer for one file.
constexpr auto replica_timeout = std::chrono::milliseconds(2000);

// File `i` of `ref`'s chain (`link`): the peer's copy when it has one that
// checks out as the file would, else the directory's file. A replica that
// fails to answer (its node down, the timeout) is not asked again.
caf::expected<stored_snapshot> read_link(file_io& io, const snapshot_ref& ref, size_t i, const chain_link& link,
                                         buffer_pool& memory, copy_source& copies) {
  if (copies.replica) {
    auto copy = fetch_replica_copy(*copies.sys, copies.replica, copies.local, link, replica_timeout);
    if (!copy && !is(copy.error(), errc::not_found))
      copies.replica = caf::actor{};
    auto checked = copy ? check_chain_link_copy(ref, i, *copy) : caf::expected<stored_snapshot>(copy.error());
    if (checked) {
      ++copies.from_memory;
      return checked;
    }
    if (copies.missed.empty())
      copies.missed = describe(checked.error());
  }
  ++copies.from_directory;
  return read_chain_link(io, ref, i, memory, verify_mode::payload);
}

// Which path served a restore, said on the shard's node (where a test or an
// operator of a cluster reads it in the node's output).
void say_restore_paths(uint32_t shard, uint64_t checkpoint, const copy_source& copies) {
  auto line = "keel: shard " + std::to_string(shard) + " restored checkpoint " + std::to_string(checkpoint) + ": " +
              std::to_string(copies.from_memory) + " files from the peer's memory, " +
              std::to_string(copies.from_directory) + " from the directory" +
              (copies.missed.empty() ? "" : " (peer copy: " + copies.missed + ")") + "\n";
  std::fputs(line.c_str(), stderr);
}

// Restores from `ref`'s chain, one file at a time (every byte of each
// checked once, its payload CRC) into `memory`, each file from the peer's
// copy where `copies` has one. A file found bad (as
// recorded: name, size and CRC) goes into `bad`, so no older ref whose chain
// holds it is tried.
caf::expected<shard_start> restore_ref(const parameter_shard_config& cfg, const parameter_shard_env& env,
                                       file_io& io, const snapshot_ref& ref, buffer_pool& memory,
                                       std::set<std::string>& bad, copy_source& copies) {
  auto links = chain_files(ref);
  auto key = [](const chain_link& l) { return l.file + "/" + std::to_string(l.bytes) + "/" + std::to_string(l.crc32c); };
  for (auto& l : links)
    if (bad.count(key(l)) != 0)
      return make_error(errc::damaged_snapshot, "its chain holds " + l.file + ", found damaged above");
  size_t at = 0;
  auto read = [&](size_t i) {
    at = i;
    return read_link(io, ref, i, links[i], memory, copies);
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

// The shard's starting core: from its pre-copy on this node when it has one
// for the newest ref (shard_standby.hpp), else from the first of
// cfg.restore_from whose chain validates, else fresh.
// `memory` is the pool the shard's snapshots will use: a file restored from
// is read into it, so the next snapshot reuses that buffer's pages instead
// of a second one staying mapped beside it.
caf::expected<shard_start> starting_core(caf::actor_system& sys, parameter_shard_config& cfg,
                                         const parameter_shard_env& env, buffer_pool& memory) {
  if (!cfg.restore_from.empty() && env.standby) {
    std::string said;
    auto ready = env.standby->take(cfg, env, said);
    if (!said.empty())
      std::fprintf(stderr, "keel: shard %u %s\n", cfg.core.shard, said.c_str());
    if (ready)
      return std::move(*ready);
  }
  if (!cfg.restore_from.empty()) {
    auto io = env.io ? env.io : posix_io();
    std::string why;
    std::set<std::string> bad;
    copy_source copies;
    copies.sys = &sys;
    copies.replica = cfg.restore_replica;
    copies.local = env.local_replica.get();
    for (auto& ref : cfg.restore_from) {
      auto restored = restore_ref(cfg, env, *io, ref, memory, bad, copies);
      if (restored) {
        if (cfg.restore_replica)
          say_restore_paths(cfg.core.shard, ref.checkpoint, copies);
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
  auto core = shard_core::make(cfg.core, std::move(cfg.initial_dense), env.table_rows);
  if (!core)
    return core.error();
  return shard_start{std::move(*core), {}};
}


}  // namespace keel
