// Shard recovery (issue 11, P3), each figure beside its ceiling measured in
// the same run, for one shard of N dense parameters (default 10 M, SGD):
//  - ceiling: reading and validating the shard's snapshot file
//    (read_snapshot_file with every CRC, from the page cache, as a restart
//    right after the checkpoint finds it);
//  - restore from the in-memory copy the job keeps of the last committed
//    checkpoint (what an in-process restart uses, and what a peer holding a
//    copy would send): decode and validate the frame, then restore_shard
//    (which checks the CRCs while it copies, into arrays a stopped shard
//    left behind: actors/tensor_recycler.hpp);
//  - crash -> serving again in a running job: a shard killed mid-run
//    (kill:shard:0) until its supervisor has started the restored
//    incarnation (the job's `restart` event), detection included.
// Medians over the repetitions.
// Usage: recovery_bench [million_params=10] [repeats=5]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/keel.hpp"
#include "actors/shard_snapshot.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/snapshot.hpp"

using namespace keel;
using steady = std::chrono::steady_clock;

namespace {

[[noreturn]] void fail(const std::string& what, const caf::error& e) {
  std::fprintf(stderr, "recovery_bench: %s: %s\n", what.c_str(), describe(e).c_str());
  std::exit(1);
}

double ms_since(steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(steady::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// kill:shard:0 in a job of one shard and one worker over the probe model;
// the milliseconds from the fault to the restored incarnation's start.
double crash_to_restart_ms(uint64_t params, const std::filesystem::path& dir) {
  model_options mo;
  mo.probe.dense_keys = params;
  mo.probe.sparse_keys = 0;
  mo.probe.lr = 1.0f;
  auto m = make_model("probe", mo);
  if (!m)
    fail("probe model", m.error());
  job_config cfg;
  cfg.training_model = std::move(*m);
  cfg.shards = 1;
  cfg.workers = 1;
  cfg.steps = 24;
  cfg.checkpoint_every = 4;
  cfg.checkpoint_dir = dir;
  cfg.optimizer.lr = 1.0f;
  auto plan = parse_fault_plan("kill:shard:0@14");
  if (!plan)
    fail("fault plan", plan.error());
  cfg.faults = *plan;
  std::filesystem::remove_all(dir);
  auto j = job::start(cfg);
  if (!j)
    fail("job", j.error());
  int64_t fault_us = -1, restart_us = -1;
  std::string from;
  (*j)->on_event([&](const job_event& e) {
    if (e.kind == event_kind::fault && e.actor == "shard:0" && fault_us < 0)
      fault_us = e.at_us;
    if (e.kind == event_kind::restart && e.actor == "shard:0" && fault_us >= 0 && restart_us < 0) {
      restart_us = e.at_us;
      from = e.snapshot;
    }
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
  return static_cast<double>(restart_us - fault_us) / 1000.0;
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
  shard_core core(sc, std::move(init));
  auto snap = snapshot_of(core, 7, 0);
  if (!snap)
    fail("snapshot", snap.error());
  auto entry = write_snapshot_file(*posix_io(), dir, "shard-0.snap", *snap, "bench");
  if (!entry)
    fail("write", entry.error());

  std::vector<double> read_ms, memory_ms, local_ms, decode_ms, crc_ms, copy_ms, crash_ms;
  std::vector<float> copy_to, snap_values(params, 0.5f);
  auto& pool = *buffer_pool::process_default();
  for (size_t i = 0; i < repeats; ++i) {
    auto t0 = steady::now();
    auto stored = read_snapshot_file(*posix_io(), dir / "shard-0.snap", pool);
    if (!stored)
      fail("read", stored.error());
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
    // For scale: the CRCs alone (restore_shard checks them while it
    // copies), and a plain copy of the same bytes into memory faulted in.
    auto d2 = decode(*snap);
    t0 = steady::now();
    if (auto err = verify_checksums(d2->root()))
      fail("crc", err);
    crc_ms.push_back(ms_since(t0));
    copy_to.resize(params);
    t0 = steady::now();
    std::memcpy(copy_to.data(), snap_values.data(), params * sizeof(float));
    copy_ms.push_back(ms_since(t0));
  }
  for (size_t i = 0; i < std::min<size_t>(repeats, 3); ++i)
    crash_ms.push_back(crash_to_restart_ms(params, dir / "job"));
  std::filesystem::remove_all(dir);

  double ceiling = median(read_ms);
  std::printf("shard of %llu M parameters (sgd), snapshot %.1f MB; medians of %zu (job runs: %zu)\n",
              static_cast<unsigned long long>(million), static_cast<double>(entry->bytes) / 1e6, repeats,
              crash_ms.size());
  std::printf("%-58s %10s %7s\n", "measurement", "ms", "ratio");
  std::printf("%-58s %10.2f %7s\n", "read + validate the snapshot file, page cache (ceiling)", ceiling, "1.00");
  std::printf("%-58s %10.2f %7.2f\n", "restore from an in-memory copy, CRCs checked (from a peer)",
              median(memory_ms), median(memory_ms) / ceiling);
  std::printf("%-58s %10.2f %7.2f\n", "  of which decode (structure, names, sizes)", median(decode_ms),
              median(decode_ms) / ceiling);
  std::printf("%-58s %10.2f %7.2f\n", "restore from the job's own in-memory copy (CRCs checked once)",
              median(local_ms), median(local_ms) / ceiling);
  std::printf("%-58s %10.2f %7.2f\n", "  for scale: the CRC pass alone (beside the copy)", median(crc_ms),
              median(crc_ms) / ceiling);
  std::printf("%-58s %10.2f %7.2f\n", "  for scale: memcpy of the parameters, memory faulted in", median(copy_ms),
              median(copy_ms) / ceiling);
  std::printf("%-58s %10.2f %7.2f\n", "crash -> restored incarnation started, in a running job", median(crash_ms),
              median(crash_ms) / ceiling);
  std::printf("goals: crash -> serving <= 1.2x the ceiling; in-memory restore of 10 M parameters <= 5 ms\n");
  return 0;
}
