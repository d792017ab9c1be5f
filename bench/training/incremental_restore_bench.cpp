// The restore figure of incremental_checkpoint_bench (issue 20, item 4):
// a shard of about 1 GB restored from its longest chain as a restarted
// shard does (read_chain_link with verify_mode::payload, then restore_chain
// with structure: actors/ps/shard_restore.cpp's restore_ref), and from its
// base alone, beside read(2) of the same files into a warm buffer plus
// their CRC32C (the goal's ceiling: the chain within 1.2x), and into memory
// allocated for each file (a second reference: the page faults of the new
// memory a restore's tables take).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/training/incremental_bench.hpp"

namespace keel::incremental_bench {

namespace {

// --- restore: a shard from its chain, beside read(2) + CRC32C ----------

// The job's shard `s`, configured as the job configures it
// (actors/job/job_shards.cpp).
shard_config shard_config_of(const job_config& j, uint32_t s) {
  placed_job_config p;
  static_cast<job_config&>(p) = j;
  auto& layout = j.training_model->layout();
  return shard_configs(p, partition_keys(layout.dense_size(), layout.sparse_key_count(), j.training.shards)).at(s);
}

// The ref of the longest chain in `dir` (the most bytes among equals).
snapshot_ref longest_chain(const fs::path& dir) {
  snapshot_ref best;
  uint64_t best_bytes = 0;
  for_each_manifest(dir, [&](const fs::path&, const checkpoint_manifest& m) {
    for (auto& ref : refs_of(dir, m)) {
      uint64_t bytes = ref.entry.bytes;
      for (auto& l : ref.entry.chain) bytes += l.bytes;
      auto key = std::make_pair(ref.entry.chain.size(), bytes);
      if (best.entry.file.empty() || key > std::make_pair(best.entry.chain.size(), best_bytes)) {
        best = ref;
        best_bytes = bytes;
      }
    }
  });
  if (best.entry.file.empty()) {
    std::fprintf(stderr, "incremental_checkpoint_bench: no checkpoint in %s\n", dir.c_str());
    std::exit(1);
  }
  return best;
}

// Wall and process CPU seconds of one timed piece.
struct timing {
  double wall = 0, cpu = 0;
};

template <class F>
timing timed(F&& f) {
  auto t0 = clock_type::now();
  auto c0 = cpu_now();
  f();
  return {seconds_since(t0), cpu_now() - c0};
}

// read(2) of each file into `buf` (warm, big enough), then its CRC32C.
timing read_and_crc(const std::vector<fs::path>& files, std::vector<char>& buf, uint32_t& sink) {
  return timed([&] {
    for (auto& p : files) {
      int fd = ::open(p.c_str(), O_RDONLY);
      if (fd < 0) {
        std::fprintf(stderr, "incremental_checkpoint_bench: open %s: %s\n", p.c_str(), errno_text(errno).c_str());
        std::exit(1);
      }
      size_t n = 0;
      for (ssize_t got; (got = ::read(fd, buf.data() + n, buf.size() - n)) > 0;) n += static_cast<size_t>(got);
      ::close(fd);
      sink ^= crc32c(buf.data(), n);
    }
  });
}

// The same into memory allocated for it (each file its own, freed after):
// what any restore that keeps the bytes in new memory pays, the page
// faults of fresh pages included.
timing read_fresh_and_crc(const std::vector<fs::path>& files, uint32_t& sink) {
  return timed([&] {
    for (auto& p : files) {
      const size_t size = fs::file_size(p);
      std::unique_ptr<char[]> buf(new char[size]);
      int fd = ::open(p.c_str(), O_RDONLY);
      if (fd < 0) {
        std::fprintf(stderr, "incremental_checkpoint_bench: open %s: %s\n", p.c_str(), errno_text(errno).c_str());
        std::exit(1);
      }
      size_t n = 0;
      for (ssize_t got; n < size && (got = ::read(fd, buf.get() + n, size - n)) > 0;) n += static_cast<size_t>(got);
      ::close(fd);
      sink ^= crc32c(buf.get(), n);
    }
  });
}

timing restore_links(const shard_config& sc, const snapshot_ref& ref, size_t links, buffer_pool& pool,
                     const table_row_source& rows, uint64_t& rows_restored) {
  auto read = [&](size_t i) { return read_chain_link(*posix_io(), ref, i, pool, verify_mode::payload); };
  caf::expected<shard_core> core{shard_core{}};
  auto t = timed([&] { core = restore_chain(sc, links, read, verify_mode::structure, rows); });
  if (!core)
    fail("restoring " + ref.entry.file, core.error());
  rows_restored = 0;
  for (auto& table : core->tables()) rows_restored += table.rows();
  return t;
}

struct restore_times {
  std::vector<timing> ceiling, fresh, keel;
};

void print_restore_row(const char* name, const restore_times& r, uint64_t bytes) {
  auto best = [](const std::vector<timing>& v, double timing::*field) {
    double b = v[0].*field;
    for (auto& t : v) b = std::min(b, t.*field);
    return b;
  };
  std::vector<double> walls;
  for (auto& t : r.keel) walls.push_back(t.wall);
  const double kw = best(r.keel, &timing::wall), cw = best(r.ceiling, &timing::wall);
  const double kc = best(r.keel, &timing::cpu), cc = best(r.ceiling, &timing::cpu);
  const double fw = best(r.fresh, &timing::wall);
  std::printf("%-16s %8.3f %6.2f %8.3f %6.2f %8.3f %8.3f %6.2f %8.3f %6.2f   (keel wall, all: %s)\n", name, kw,
              bytes / kw / 1e9, cw, kw / cw, kc, cc, kc / cc, fw, kw / fw, range(walls, 1, "%.3f").c_str());
}

}  // namespace

void bench_restore(const job_config& j, size_t repeats) {
  auto ref = longest_chain(j.checkpoints.dir);
  auto sc = shard_config_of(j, ref.entry.shard);
  auto rows = model_table_rows(j.training_model, j.training.seed);
  std::vector<fs::path> files;
  uint64_t chain_bytes = 0, largest = 0;
  for (auto& l : ref.entry.chain) {
    files.push_back(fs::path(ref.dir) / l.file);
    chain_bytes += l.bytes;
    largest = std::max(largest, l.bytes);
  }
  files.push_back(fs::path(ref.dir) / ref.entry.file);
  chain_bytes += ref.entry.bytes;
  largest = std::max(largest, ref.entry.bytes);
  std::vector<char> buf(largest + 4096, 1);
  auto pool = buffer_pool::create(size_t{8} << 30);
  uint32_t sink = 0;
  uint64_t chain_rows = 0, base_rows = 0;
  restore_times chain, base;
  read_and_crc(files, buf, sink);  // the files in the page cache for both
  for (size_t i = 0; i < std::max<size_t>(repeats, 3); ++i) {
    chain.ceiling.push_back(read_and_crc(files, buf, sink));
    chain.fresh.push_back(read_fresh_and_crc(files, sink));
    chain.keel.push_back(restore_links(sc, ref, files.size(), *pool, rows, chain_rows));
    base.ceiling.push_back(read_and_crc({files[0]}, buf, sink));
    base.fresh.push_back(read_fresh_and_crc({files[0]}, sink));
    base.keel.push_back(restore_links(sc, ref, 1, *pool, rows, base_rows));
  }
  std::printf("== restore of shard %u from its chain as a restarted shard reads it (%zu files: a base of %.0f MB "
              "and %zu deltas, %.0f MB in all; %llu rows, the base %llu), page cache; best of %zu (crc %08x)\n",
              ref.entry.shard, files.size(), fs::file_size(files[0]) / 1e6, files.size() - 1, chain_bytes / 1e6,
              static_cast<unsigned long long>(chain_rows), static_cast<unsigned long long>(base_rows),
              chain.keel.size(), sink);
  std::printf("%-16s %8s %6s %8s %6s %8s %8s %6s %8s %6s\n", "restore", "keel s", "GB/s", "ceil s", "ratio",
              "keel cpu", "ceil cpu", "ratio", "fresh s", "ratio");
  print_restore_row("the chain", chain, chain_bytes);
  print_restore_row("the base alone", base, fs::file_size(files[0]));
  std::printf("(ceiling: read(2) of the same files into a warm buffer and their CRC32C, no decoding; keel: "
              "read_chain_link (payload CRC) + restore_chain, a pool kept across repetitions; wall and this "
              "process's CPU seconds, each the best of the repetitions. Goal: the chain <= 1.2x. fresh: the same read(2) + "
              "CRC32C into memory allocated for each file, the page faults a restore's new memory takes included: "
              "a second reference, not the goal's ceiling)\n\n");
}


// A shard of about 1 GB with a chain: ctr-fm on one shard, a checkpoint
// every 1/16 of the epoch; its directory is left for the restore.
job_config restore_source(uint64_t examples, uint64_t vocabulary) {
  auto m = make_model(vocabulary, examples, true);
  auto every = std::max<uint64_t>(1, steps_per_epoch(examples, 2, 128) / 16);
  auto cfg = config_of(m, every, chain_options{}.full_every, bench_dir("restore"), 16);
  cfg.training.shards = 1;
  auto r = run_job(cfg);
  std::printf("(the shard to restore: ctr-fm, vocabulary %.0e, %llu training rows, 1 shard, 2 workers, a "
              "checkpoint every %llu steps; %.0f MB of values and AdaGrad state)\n",
              static_cast<double>(vocabulary), static_cast<unsigned long long>(examples),
              static_cast<unsigned long long>(every), model_bytes(r) / 1e6);
  return cfg;
}

}  // namespace keel::incremental_bench
