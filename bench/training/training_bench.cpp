// Training figures of keel, each beside a ceiling measured in the same run
// (issue 11's P4, P5 and scaling table):
//  - time to 97% test accuracy and samples/s: keel with `keel train`'s
//    defaults (2 shards, 2 workers, BSP, lr 0.1, batch 32, checkpoints every
//    50 steps) beside the plain single-threaded SGD loop of the same model
//    (models/plain_trainer.hpp). The plain loop is scored after every
//    epoch, its time excluding the scoring. Scoring keel's parameters
//    mid-run would compete with its training for the cores, and would
//    read them some steps past the epoch's end. So keel runs of 1, 2, ...
//    epochs, each scored once at its end, find the first E whose
//    parameters reach the target (BSP runs are deterministic: a run's
//    parameters after E epochs are the same every time), and the timed
//    runs then train E epochs; each must reach the target at its end, or
//    its time does not count. keel's time is the run's wall time to its
//    final parameters read (start-up of the actors included, the final
//    scoring not). Alternating pairs, `repeats` of them; medians of each.
//  - the cost of checkpoints every second: runs without checkpoints
//    alternate with runs checkpointing every ~1 s of training (the interval
//    in steps from a warm-up run's speed); medians of each. A run without
//    checkpoints keeps every push in its workers' replay logs, so it is no
//    ceiling; the cost is therefore also accounted in the checkpointing
//    runs, against their own wall time, from what each run's job_result
//    reports: steps the checkpoint window held back (window_wait_seconds,
//    per worker) and the checkpointer thread's CPU writing the checkpoints
//    (checkpoint_write_cpu_seconds, as a share of the cores). The shards'
//    snapshot captures are not reported by the job, so they are not in
//    that total (they are inside the runs' wall time).
//  - scaling: samples/s and push throughput (gradient bytes the workers
//    pushed per second) for 1, 2, 4 workers x 1, 2, 4 shards, beside the
//    plain loop's samples/s.
// Usage: training_bench [model=mnist-mlp] [epochs=6] [repeats=3]
//   (MNIST needs `bash scripts/fetch-mnist.sh` first)
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "actors/keel.hpp"
#include "bench/bench_common.hpp"
#include "models/plain_trainer.hpp"

using namespace keel;

namespace {

[[noreturn]] void fail(const caf::error& e) {
  std::fprintf(stderr, "training_bench: %s\n", describe(e).c_str());
  std::exit(1);
}

using bench::median;

// One keel run of `epochs` with `keel train`'s batch size; its result.
job_result run_keel(const std::shared_ptr<const model>& m, uint32_t workers, uint32_t shards, uint64_t epochs,
                    uint64_t checkpoint_every, float lr) {
  job_config cfg;
  cfg.training_model = m;
  cfg.training.workers = workers;
  cfg.training.shards = shards;
  cfg.training.batch_size = 32;
  cfg.training.optimizer.lr = lr;
  cfg.training.steps = epochs * steps_per_epoch(m->num_train_examples(), workers, cfg.training.batch_size);
  cfg.checkpoints.every = checkpoint_every;
  cfg.checkpoints.dir = std::filesystem::temp_directory_path() / ("keel-training-bench-" + std::to_string(::getpid()));
  std::filesystem::remove_all(cfg.checkpoints.dir);
  auto j = job::start(cfg);
  if (!j)
    fail(j.error());
  auto r = (*j)->wait(std::chrono::hours(1));
  if (!r)
    fail(r.error());
  j->reset();
  std::filesystem::remove_all(cfg.checkpoints.dir);
  return std::move(*r);
}

}  // namespace

int main(int argc, char** argv) {
  std::string name = argc > 1 ? argv[1] : "mnist-mlp";
  uint64_t epochs = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 6;
  size_t repeats = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 3;
  if (epochs == 0 || repeats == 0) {
    std::fprintf(stderr, "training_bench: epochs and repeats must be positive numbers\n");
    return 2;
  }
  model_options mo;
  mo.data_dir = default_data_dir();
  auto made = make_model(name, mo);
  if (!made)
    fail(made.error());
  std::shared_ptr<const model> m = std::move(*made);
  const float lr = name == "mnist-softmax" ? 0.05f : 0.1f;
  const double target = 0.97;
  const double param_bytes = static_cast<double>(m->layout().dense_size()) * 4;

  // P5: time to the target accuracy, keel's defaults beside the plain loop,
  // in `repeats` alternating pairs; medians of each figure.
  plain_trainer_config pc;
  pc.lr = lr;
  pc.batch_size = 32;
  pc.epochs = epochs;
  pc.evaluate_each_epoch = true;
  std::vector<double> plain_rate, plain_time, plain_acc, keel_rate, keel_time, keel_acc;
  auto acc = [](const evaluation& e) { return e.accuracy ? *e.accuracy : -1.0; };
  uint64_t keel_epochs = 0;  // E: the fewest epochs after which keel's parameters reach the target
  for (uint64_t e = 1; e <= epochs && keel_epochs == 0; ++e)
    if (acc(run_keel(m, 2, 2, e, 50, lr).quality) >= target)
      keel_epochs = e;
  for (size_t i = 0; i < repeats; ++i) {
    auto plain = train_plain(*m, pc);
    if (!plain)
      fail(plain.error());
    double to_target = NAN, t = 0;
    for (auto& e : plain->epochs) {
      t += e.train_seconds;
      if (std::isnan(to_target) && e.test && e.test->accuracy && *e.test->accuracy >= target)
        to_target = t;
    }
    plain_rate.push_back(plain->examples_per_second);
    plain_time.push_back(to_target);
    plain_acc.push_back(acc(plain->final_test));
    if (keel_epochs == 0)
      continue;
    auto k = run_keel(m, 2, 2, keel_epochs, 50, lr);
    keel_rate.push_back(k.samples_per_second);
    keel_acc.push_back(acc(k.quality));
    keel_time.push_back(acc(k.quality) >= target ? k.seconds : NAN);
  }
  if (keel_epochs == 0) {
    std::printf("keel did not reach %.0f%% in %llu epochs\n", target * 100,
                static_cast<unsigned long long>(epochs));
    keel_rate = keel_time = keel_acc = {NAN};
  }
  const double plain_samples = median(plain_rate);
  std::printf("== time to %.0f%% test accuracy (%s, up to %llu epochs, median of %zu pairs)\n",
              target * 100, name.c_str(), static_cast<unsigned long long>(epochs), repeats);
  std::printf("%-46s %12s %10s %14s\n", "run", "samples/s", "test acc", "s to target");
  std::printf("%-46s %12.0f %10.4f %14.2f\n", "plain single-thread SGD (ceiling)", plain_samples,
              median(plain_acc), median(plain_time));
  std::printf("%-46s %12.0f %10.4f %14.2f\n",
              ("keel train defaults, " + std::to_string(keel_epochs) + " epochs unscored").c_str(),
              median(keel_rate), median(keel_acc), median(keel_time));
  std::printf("(keel train defaults: 2 shards, 2 workers, BSP. Runs of 1, 2, ... epochs, each scored at\n"
              " its end, first reached the target after %llu epochs)\n",
              static_cast<unsigned long long>(keel_epochs));
  std::printf("ratio keel / plain: samples/s %.2f, time to target %.2f (<= 1 is the goal)\n",
              median(keel_rate) / plain_samples, median(keel_time) / median(plain_time));
  if (keel_time.size() == plain_time.size()) {
    std::printf("each pair's time ratio, in run order:");
    for (size_t i = 0; i < keel_time.size(); ++i) std::printf(" %.2f", keel_time[i] / plain_time[i]);
    std::printf("\n");
  }
  std::printf("\n");

  // P4: checkpoints every second, against none. A discarded warm-up run
  // first; then pairs whose order alternates, so drift of the machine hits
  // both sides alike. Runs as long as the P5 one: short runs are dominated by
  // start-up and noise.
  std::vector<double> without, with, window_share, cpu_share;
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  // The warm-up checkpoints as keel train does: its speed sets the interval
  // (a run without checkpoints is slower, see below).
  auto warm = run_keel(m, 2, 2, epochs, 50, lr);
  double steps_per_s = static_cast<double>(warm.steps) / warm.seconds;
  uint64_t every = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(steps_per_s)));
  uint64_t committed = 0;
  for (size_t i = 0; i < repeats; ++i) {
    for (int k = 0; k < 2; ++k) {
      bool checkpoints = (k == 0) == (i % 2 == 1);
      auto r = run_keel(m, 2, 2, epochs, checkpoints ? every : 0, lr);
      (checkpoints ? with : without).push_back(r.samples_per_second);
      if (checkpoints) {
        committed = r.checkpoints;
        window_share.push_back(r.window_wait_seconds / 2 / r.seconds);
        cpu_share.push_back(r.checkpoint_write_cpu_seconds / cores / r.seconds);
      }
    }
  }
  double w0 = median(without), w1 = median(with);
  std::printf("== checkpoints every second (2 shards, 2 workers, %llu epochs, median of %zu)\n",
              static_cast<unsigned long long>(epochs), repeats);
  std::printf("%-46s %12s\n", "run", "samples/s");
  std::printf("%-46s %12.0f\n", "no checkpoints (logs keep every push)", w0);
  std::printf("%-46s %12.0f\n", ("checkpoint every " + std::to_string(every) + " steps (~1 s)").c_str(), w1);
  std::printf("ratio %.3f: the checkpointing runs' throughput over the others' (%llu committed in the last run)\n",
              w1 / w0, static_cast<unsigned long long>(committed));
  if (w1 > w0)
    std::printf("(a run without checkpoints is slower: its workers must keep every push in their replay logs,\n"
                " the only way to bring back a shard that restarts from its initial values, so the logs grow\n"
                " all run long; checkpoints truncate them)\n");
  double ws = median(window_share), ps = median(cpu_share);
  std::printf(
      "what the checkpoints cost the checkpointing runs, as shares of their own wall time, as the\n"
      "runs' job_result reports it (medians; the shards' snapshot captures are not reported):\n");
  std::printf("  %-66s %6.3f%%\n", "steps held back by the checkpoint window (per worker)",
              100 * ws);
  std::printf("  %-66s %6.3f%%\n",
              ("checkpointer CPU writing them (share of " + std::to_string(static_cast<int>(cores)) + " cores)").c_str(),
              100 * ps);
  std::printf("  %-66s %6.3f%% (goal <= 2%%)\n", "total", 100 * (ws + ps));
  std::printf("\n");

  // Scaling: 1, 2, 4 workers x 1, 2, 4 shards, one epoch each.
  std::printf("== scaling (1 epoch each, checkpoints every 50 steps; ceiling: plain loop %.0f samples/s)\n",
              plain_samples);
  std::printf("%-8s %-7s %12s %8s %14s\n", "workers", "shards", "samples/s", "ratio", "push GB/s");
  for (uint32_t w : {1u, 2u, 4u}) {
    for (uint32_t s : {1u, 2u, 4u}) {
      auto r = run_keel(m, w, s, 1, 50, lr);
      double push_gbps = static_cast<double>(r.steps) * w * param_bytes / r.seconds / 1e9;
      std::printf("%-8u %-7u %12.0f %8.2f %14.3f\n", w, s, r.samples_per_second,
                  r.samples_per_second / plain_samples, push_gbps);
    }
  }
  return 0;
}
