// Shard recovery (issue 11, P3) for one shard of N dense parameters
// (default 10 M, SGD), each figure beside the ceiling of the same operation,
// measured in the same run with plain C++ and POSIX calls (no keel code):
//  - restore from an in-memory copy of its snapshot, every CRC checked (what
//    a peer holding a copy would send): decode the frame, then restore_shard,
//    which checks the CRCs while it copies into arrays a stopped shard left
//    behind (actors/core/tensor_recycler.hpp); ceiling: memcpy of the parameters'
//    bytes into memory already faulted in;
//  - restore from the job's own in-memory copy (its CRCs were checked when
//    it was made: verify_mode::structure); same ceiling;
//  - restore from the snapshot file: read_snapshot_file (every CRC), then
//    restore_shard; ceiling: open + read + close of the same file into a
//    buffer already faulted in, both from the page cache (the file was just
//    written, as a restart right after a checkpoint finds it);
//  - crash -> serving in a running job: a shard killed mid-run
//    (kill:shard:0) until its restored incarnation has answered its first
//    request (a worker asking what it holds: the worker's `replay` event),
//    detection and the supervisor's restart included; the job restores from
//    its in-memory copy, so the ceiling is the memcpy above. The time to the
//    restarted incarnation's start (the `restart` event) is printed beside it.
// Medians over the repetitions.
// Usage: recovery_bench [million_params=10] [repeats=5]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/core/shard_snapshot.hpp"
#include "actors/keel.hpp"
#include "bench/bench_common.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/snapshot.hpp"

using namespace keel;
using steady = std::chrono::steady_clock;

namespace {

[[noreturn]] void fail(const std::string& what, const caf::error& e) {
  bench::fail("recovery_bench", what, e);
}

using bench::median;
using bench::ms_since;

// Plain POSIX read of the whole file into `into` (sized and faulted in by
// the caller); the bytes read.
size_t plain_read(const std::filesystem::path& p, std::vector<char>& into) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::perror("recovery_bench: open");
    std::exit(1);
  }
  size_t got = 0;
  while (got < into.size()) {
    ssize_t n = ::read(fd, into.data() + got, into.size() - got);
    if (n < 0) {
      std::perror("recovery_bench: read");
      std::exit(1);
    }
    if (n == 0)
      break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return got;
}

struct crash_times {
  double restarted_ms = 0;  // fault -> the restored incarnation started
  double serving_ms = 0;    // fault -> it answered a worker's first request
};

// kill:shard:0 in a job of one shard and one worker over the probe model.
crash_times crash_to_serving(uint64_t params, const std::filesystem::path& dir) {
  model_options mo;
  mo.probe.dense_keys = params;
  mo.probe.sparse_keys = 0;
  mo.probe.lr = 1.0f;
  auto m = make_model("probe", mo);
  if (!m)
    fail("probe model", m.error());
  job_config cfg;
  cfg.training_model = std::move(*m);
  cfg.training.shards = 1;
  cfg.training.workers = 1;
  cfg.training.steps = 24;
  cfg.checkpoints.every = 4;
  cfg.checkpoints.dir = dir;
  cfg.training.optimizer.lr = 1.0f;
  auto plan = parse_fault_plan("kill:shard:0@14");
  if (!plan)
    fail("fault plan", plan.error());
  cfg.faults.plan = *plan;
  std::filesystem::remove_all(dir);
  auto j = job::start(cfg);
  if (!j)
    fail("job", j.error());
  int64_t fault_us = -1, restart_us = -1, serving_us = -1;
  std::string from;
  (*j)->on_event([&](const job_event& e) {
    if (e.kind == event_kind::fault && e.actor == "shard:0" && fault_us < 0)
      fault_us = e.at_us;
    if (e.kind == event_kind::restart && e.actor == "shard:0" && fault_us >= 0 && restart_us < 0) {
      restart_us = e.at_us;
      from = e.snapshot;
    }
    // The worker emits `replay` once the new incarnation has answered its
    // status request, before it resends anything.
    if (e.kind == event_kind::replay && e.peer == "shard:0" && restart_us >= 0 && serving_us < 0)
      serving_us = e.at_us;
  });
  auto r = (*j)->wait(std::chrono::minutes(10));
  if (!r)
    fail("job", r.error());
  j->reset();
  std::filesystem::remove_all(dir);
  if (fault_us < 0 || restart_us < 0 || from.empty()) {
    std::fprintf(stderr, "recovery_bench: the job did not restart shard:0 from a snapshot\n");
    std::exit(1);
  }
  if (serving_us < 0) {
    std::fprintf(stderr, "recovery_bench: the worker replayed nothing to the restarted shard:0\n");
    std::exit(1);
  }
  return {static_cast<double>(restart_us - fault_us) / 1000.0,
          static_cast<double>(serving_us - fault_us) / 1000.0};
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t million = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10;
  size_t repeats = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 5;
  if (million == 0 || repeats == 0) {
    std::fprintf(stderr, "recovery_bench: million_params and repeats must be positive numbers\n");
    return 2;
  }
  const uint64_t params = million * 1000000;
  auto dir = std::filesystem::temp_directory_path() / ("keel-recovery-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);

  shard_config sc;
  sc.num_workers = 1;
  sc.dense = {0, params};
  std::vector<float> init(params);
  for (uint64_t i = 0; i < params; ++i)
    init[i] = 1e-4f * static_cast<float>(i % 1000);
  auto made = shard_core::make(sc, std::move(init));
  if (!made)
    fail("shard", made.error());
  auto& core = *made;
  auto snap = snapshot_of(core, 7, 0);
  if (!snap)
    fail("snapshot", snap.error());
  auto entry = write_snapshot_file(*posix_io(), dir, "shard-0.snap", *snap, "bench");
  if (!entry)
    fail("write", entry.error());

  const auto file = dir / "shard-0.snap";
  std::vector<double> memory_ms, decode_ms, local_ms, file_ms, read_ms, crc_ms, copy_ms,
      restarted_ms, serving_ms;
  std::vector<float> copy_from(params, 0.5f), copy_to(params, 0.0f);
  std::vector<char> read_into(std::filesystem::file_size(file) + 1, 0);
  auto& pool = *buffer_pool::process_default();
  for (size_t i = 0; i < repeats; ++i) {
    // The ceilings, plain C++ and POSIX: a memcpy of the parameters' bytes
    // and a read of the snapshot file, into memory already faulted in.
    auto t0 = steady::now();
    std::memcpy(copy_to.data(), copy_from.data(), params * sizeof(float));
    copy_ms.push_back(ms_since(t0));
    copy_from[i % params] = copy_to[(i * 7919) % params];
    t0 = steady::now();
    if (plain_read(file, read_into) != entry->bytes) {
      std::fprintf(stderr, "recovery_bench: short read of %s\n", file.c_str());
      return 1;
    }
    read_ms.push_back(ms_since(t0));

    {
      t0 = steady::now();
      auto d = decode(*snap);
      if (!d)
        fail("decode", d.error());
      auto decoded_at = steady::now();
      auto restored = restore_shard(sc, d->root());
      if (!restored)
        fail("restore", restored.error());
      memory_ms.push_back(ms_since(t0));
      decode_ms.push_back(std::chrono::duration<double, std::milli>(decoded_at - t0).count());
      if (restored->dense().size() != params)
        return 1;
    }  // gone, as a crashed incarnation: its arrays go to the tensor recycler
    {
      // The same copy held in this process, whose CRCs were checked when it
      // was made (the job's restart path: verify_mode::structure).
      t0 = steady::now();
      auto d = decode(*snap);
      auto local = restore_shard(sc, d->root(), verify_mode::structure);
      if (!local)
        fail("restore", local.error());
      local_ms.push_back(ms_since(t0));
    }
    {
      // From the file: read and validate it (every CRC), then restore
      // without checking the CRCs a second time.
      t0 = steady::now();
      auto stored = read_snapshot_file(*posix_io(), file, pool);
      if (!stored)
        fail("read", stored.error());
      auto from_file = restore_shard(sc, stored->root(), verify_mode::structure);
      if (!from_file)
        fail("restore", from_file.error());
      file_ms.push_back(ms_since(t0));
    }
    // For scale: the CRCs alone (restore_shard checks them while it copies).
    auto d2 = decode(*snap);
    t0 = steady::now();
    if (auto err = verify_checksums(d2->root()))
      fail("crc", err);
    crc_ms.push_back(ms_since(t0));
  }
  for (size_t i = 0; i < std::min<size_t>(repeats, 3); ++i) {
    auto c = crash_to_serving(params, dir / "job");
    restarted_ms.push_back(c.restarted_ms);
    serving_ms.push_back(c.serving_ms);
  }
  std::filesystem::remove_all(dir);

  const double copy = median(copy_ms), read = median(read_ms);
  const double param_mb = static_cast<double>(params) * 4 / 1e6;
  std::printf(
      "shard of %llu M parameters (sgd): %.1f MB of parameters, snapshot file %.1f MB; "
      "medians of %zu (job runs: %zu)\n",
      static_cast<unsigned long long>(million), param_mb, static_cast<double>(entry->bytes) / 1e6,
      repeats, serving_ms.size());
  std::printf("%-62s %9s %-34s %9s %7s\n", "figure", "keel ms", "ceiling", "ms", "ratio");
  auto row = [](const char* figure, double keel_ms, const char* ceiling, double ceiling_ms) {
    std::printf("%-62s %9.2f %-34s %9.2f %7.2f\n", figure, keel_ms, ceiling, ceiling_ms,
                keel_ms / ceiling_ms);
  };
  row("restore from an in-memory copy, every CRC checked (a peer's)", median(memory_ms),
      "memcpy of the parameters' bytes", copy);
  row("restore from the job's own in-memory copy (CRCs checked once)", median(local_ms),
      "memcpy of the parameters' bytes", copy);
  row("restore from the snapshot file (read, every CRC; page cache)", median(file_ms),
      "read(2) of the same file", read);
  row("crash -> serving: restored shard answered its first request", median(serving_ms),
      "memcpy of the parameters' bytes", copy);
  row("crash -> restored incarnation started (the restart event)", median(restarted_ms),
      "memcpy of the parameters' bytes", copy);
  std::printf(
      "for scale: decode of the in-memory copy %.2f ms; the CRC pass alone %.2f ms (%.1f GB/s)\n",
      median(decode_ms), median(crc_ms), param_mb / median(crc_ms));
  std::printf(
      "goals (issue 11): restore of 10 M parameters from memory <= 5 ms; crash -> serving <= 1.2x "
      "its ceiling\n");
  return 0;
}
