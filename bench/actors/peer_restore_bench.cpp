// Restore of one shard from a peer's in-memory copy vs from the checkpoint
// directory (issue 20, item 3), each through the shard's own start
// (spawn_parameter_shard with restore_from: restore_ref, every byte of every
// file checked), for one shard of N dense parameters (default 25 M, SGD)
// whose checkpoint is a base (a chain of one file). Beside them,
// measured in the same run, the ceiling: read(2) of the chain's files into a
// buffer already faulted in plus the CRC32C of the bytes read (the least a
// restore that checks what it reads can do), from the page cache (the files
// were just written, as a restart right after a checkpoint finds them; a
// cold disk only widens the gap). The peer's copy is this process's
// replica_store (a restart on the peer node reads its own memory: no
// network, no disk). Medians over the repetitions.
// Usage: peer_restore_bench [million_params=25] [repeats=5]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/core/replica_store.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/snapshot_replica.hpp"
#include "bench/bench_common.hpp"
#include "messages/errors.hpp"
#include "storage/crc32c.hpp"

using namespace keel;
using steady = std::chrono::steady_clock;

namespace {

[[noreturn]] void fail(const std::string& what, const caf::error& e) {
  bench::fail("peer_restore_bench", what, e);
}

using bench::median;
using bench::ms_since;

// read(2) of `p` into `into` (faulted in by the caller) and the CRC32C of
// the bytes read, piece by piece while they are in cache; the bytes read.
size_t read_and_crc(const std::filesystem::path& p, std::vector<char>& into, uint32_t& crc) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::perror("peer_restore_bench: open");
    std::exit(1);
  }
  size_t got = 0;
  crc = crc32c_empty;
  for (;;) {
    ssize_t n = ::read(fd, into.data() + got, std::min<size_t>(into.size() - got, size_t{4} << 20));
    if (n <= 0)
      break;
    crc = crc32c_extend(crc, into.data() + got, static_cast<size_t>(n));
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return got;
}

// The restored shard's start, timed: spawn_parameter_shard returns once the
// core is restored. The shard is stopped again, and waited for, before the
// next (its arrays go back to the tensor recycler, as a crashed one's do).
double timed_restore(caf::actor_system& sys, const parameter_shard_config& cfg, const parameter_shard_env& env) {
  auto t0 = steady::now();
  auto shard = spawn_parameter_shard(sys, cfg, env);
  auto took = ms_since(t0);
  if (!shard)
    fail("restore", shard.error());
  caf::scoped_actor self{sys};
  self->monitor(*shard);
  self->send_exit(*shard, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {});
  return took;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t million = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 25;
  size_t repeats = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 5;
  if (million == 0 || repeats == 0) {
    std::fprintf(stderr, "peer_restore_bench: million_params and repeats must be positive numbers\n");
    return 2;
  }
  const uint64_t params = million * 1000000;
  auto dir = std::filesystem::temp_directory_path() / ("keel-peer-restore-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);

  shard_config sc;
  sc.num_workers = 1;
  sc.dense = {0, params};
  std::vector<float> init(params);
  for (uint64_t i = 0; i < params; ++i) init[i] = 1e-4f * static_cast<float>(i % 1000);
  auto core = shard_core::make(sc, std::move(init));
  if (!core)
    fail("shard", core.error());
  run_identity run{"0123456789abcdef0123456789abcdef", "bench-config", {}};
  auto snap = snapshot_of(*core, 1, 0, run);
  if (!snap)
    fail("snapshot", snap.error());
  auto entry = write_snapshot_file(*posix_io(), dir, "ckpt-1.shard-0.snap", *snap, "bench");
  if (!entry)
    fail("write", entry.error());

  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto store = std::make_shared<replica_store>();
  auto replica = spawn_snapshot_replica(sys, store);
  store->keep("bench", 0, chain_link{1, entry->file, entry->bytes, entry->crc32c}, {}, *snap);

  parameter_shard_config from_dir;
  from_dir.core = sc;
  from_dir.run_id = run.run_id;
  from_dir.config_hash = run.config_hash;
  from_dir.restore_from = {snapshot_ref{dir.string(), 1, 1, *entry, run.run_id, run.config_hash}};
  auto from_peer = from_dir;
  from_peer.restore_replica = replica;
  parameter_shard_env env;
  env.local_replica = store;

  std::vector<double> peer_ms, dir_ms, ceiling_ms;
  std::vector<char> read_into(entry->bytes + 1, 0);
  for (size_t i = 0; i < repeats; ++i) {
    auto t0 = steady::now();
    uint32_t crc = 0;
    if (read_and_crc(dir / entry->file, read_into, crc) != entry->bytes)
      fail("ceiling", make_error(errc::damaged_snapshot, "short read"));
    ceiling_ms.push_back(ms_since(t0));
    peer_ms.push_back(timed_restore(sys, from_peer, env));
    dir_ms.push_back(timed_restore(sys, from_dir, {}));
  }
  caf::anon_send_exit(replica, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(dir);

  const double peer = median(peer_ms), directory = median(dir_ms), ceiling = median(ceiling_ms);
  std::printf("shard of %llu M parameters (sgd): checkpoint file %.1f MB; replica holds %.1f MB; medians of %zu\n",
              static_cast<unsigned long long>(million), static_cast<double>(entry->bytes) / 1e6,
              static_cast<double>(store->bytes()) / 1e6, repeats);
  std::printf("%-58s %9s %-36s %9s %7s\n", "figure", "keel ms", "ceiling", "ms", "ratio");
  auto row = [&](const char* figure, double ms) {
    std::printf("%-58s %9.2f %-36s %9.2f %7.2f\n", figure, ms, "read(2) + CRC32C of the same file", ceiling,
                ms / ceiling);
  };
  row("restore from the peer's memory (every byte checked)", peer);
  row("restore from the directory (read, every byte checked)", directory);
  std::printf("peer / directory: %.2f (goal, issue 20: <= 0.5)\n", peer / directory);
  return 0;
}
