#pragma once
// What incremental_checkpoint_bench's figures share (issue 20): the CTR
// model and job of every run, timing, and the checkpoint directory's
// manifests. The bytes and cost figures are incremental_checkpoint_bench.cpp,
// the cost over a second epoch incremental_warm_bench.cpp, the restore
// figure incremental_restore_bench.cpp.

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/core/partition.hpp"
#include "actors/core/shard_delta.hpp"
#include "actors/job/job_controller.hpp"
#include "actors/job/placed_job.hpp"
#include "actors/keel.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_job.hpp"
#include "messages/protocol.hpp"
#include "models/ctr_model.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/crc32c.hpp"
#include "storage/store_layout.hpp"

namespace keel::incremental_bench {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

[[noreturn]] inline void fail(const std::string& what, const caf::error& e) {
  bench::fail("incremental_checkpoint_bench", what, e);
}

inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// This process's CPU seconds so far (every thread's).
inline double cpu_now() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

inline std::shared_ptr<const ctr_model> make_model(uint64_t vocabulary, uint64_t examples, bool fm) {
  ctr_config c;
  c.vocabulary = vocabulary;
  c.train_examples = examples;
  c.test_examples = 10000;
  auto m = ctr_model::make(c, fm ? c.fm_factors : 0);
  if (!m)
    fail("the model", m.error());
  return *m;
}

inline fs::path bench_dir(const std::string& what) {
  return fs::temp_directory_path() / ("keel-incremental-bench-" + std::to_string(::getpid()) + "-" + what);
}

// ctr_training_bench's layout: 2 shards, 2 workers of batch 128, BSP,
// AdaGrad, gradients averaged; one epoch.
inline job_config config_of(const std::shared_ptr<const ctr_model>& m, uint64_t every, uint32_t full_every,
                            const fs::path& dir, size_t keep) {
  job_config cfg;
  cfg.training_model = m;
  cfg.training.workers = 2;
  cfg.training.shards = 2;
  cfg.training.batch_size = 128;
  cfg.training.combine = gradient_combine::mean;
  cfg.training.optimizer.kind = optimizer_kind::adagrad;
  cfg.training.optimizer.lr = ctr_plain_lr(m->factors());
  cfg.training.steps = steps_per_epoch(m->num_train_examples(), 2, cfg.training.batch_size);
  cfg.checkpoints.every = every;
  cfg.checkpoints.keep = keep;
  cfg.checkpoints.dir = dir;
  cfg.checkpoints.incremental.full_every = full_every;
  // Without checkpoints nothing empties the replay logs: bound them.
  if (every == 0)
    cfg.checkpoints.max_log_bytes = uint64_t{64} << 20;
  cfg.evaluation.on_workers = true;
  return cfg;
}

inline job_result run_job(const job_config& cfg) {
  fs::remove_all(cfg.checkpoints.dir);
  return bench::run_job_to_end(cfg, "incremental_checkpoint_bench");
}

inline uint64_t model_bytes(const job_result& r) {
  uint64_t b = 0;
  for (auto& t : r.tables) b += t.parameter_bytes;
  return b;
}

// Calls `each` with the path and contents of every manifest in `dir`.
template <class Each>
inline void for_each_manifest(const fs::path& dir, Each each) {
  auto pool = buffer_pool::create();
  for (auto& f : fs::directory_iterator(dir)) {
    auto name = parse_store_file_name(f.path().filename().string());
    if (!name || name->kind != store_file_kind::manifest)
      continue;
    auto m = read_manifest_file(*posix_io(), f.path(), *pool);
    if (!m)
      fail("reading " + f.path().string(), m.error());
    each(f.path(), *m);
  }
}

// Each value of `v` times `scale`, printed with `fmt`: "lo-hi", or one value.
inline std::string range(const std::vector<double>& v, double scale, const char* fmt) {
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  char a[64], b[64];
  std::snprintf(a, sizeof a, fmt, *lo * scale);
  std::snprintf(b, sizeof b, fmt, *hi * scale);
  return v.size() == 1 ? std::string(a) : std::string(a) + "-" + b;
}

// Each round's ratio of `v` to the run without checkpoints of that round.
inline std::vector<double> ratios(const std::vector<double>& v, const std::vector<double>& none) {
  std::vector<double> out;
  for (size_t i = 0; i < v.size() && i < none.size(); ++i) out.push_back(v[i] / none[i]);
  return out;
}

// The checkpoint cost over the second of two epochs (a model that has
// stopped growing), with the default chains and with longer ones, beside
// the same epoch without checkpoints; `repeats` alternating rounds.
void bench_cost_warm(uint64_t examples, uint64_t vocabulary, size_t repeats, double seconds);

// A shard of about 1 GB with a chain (ctr-fm on one shard, a checkpoint
// every 1/16 of the epoch); its directory is left for bench_restore.
job_config restore_source(uint64_t examples, uint64_t vocabulary);

// The restore of that shard from its longest chain and from its base
// alone, beside read(2) + CRC32C of the same files; best of `repeats`.
void bench_restore(const job_config& source, size_t repeats);

}  // namespace keel::incremental_bench
