// The checkpoint cost of incremental_checkpoint_bench (issue 20, item 4)
// over the second of two epochs: by then the model holds a row for every
// ID of its training rows, so a delta holds the rows an interval updated,
// not new ones (a long run's steady state, where the first epoch's figure
// is a model growing from empty). examples/s of the second epoch (from the
// progress event at the first epoch's end to the run's end) with
// incremental checkpoints, at the defaults and with longer chains
// (full_every 16, delta_fraction 2.0), beside the same epoch without
// checkpoints (the ceiling); alternating rounds.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/training/incremental_bench.hpp"

namespace keel::incremental_bench {

namespace {

struct warm_run {
  double examples_per_second = 0;  // of the second epoch
  double write_cpu_share = 0;      // the writing threads' CPU over 2 cores, whole run
  uint64_t checkpoints = 0;
};

warm_run run_warm(const std::shared_ptr<const ctr_model>& m, uint64_t every, chain_options chain,
                  const std::string& name) {
  auto cfg = config_of(m, every, chain.full_every, bench_dir(name), 8);
  const uint64_t epoch = cfg.training.steps;
  cfg.training.steps = 2 * epoch;
  cfg.checkpoints.incremental.delta_fraction = chain.delta_fraction;
  cfg.progress.every = epoch;
  auto r = run_job(cfg);
  fs::remove_all(cfg.checkpoints.dir);
  double second_from = -1;
  for (auto& e : r.events)
    if (e.kind == event_kind::progress && e.step == epoch)
      second_from = static_cast<double>(e.at_us) / 1e6;
  if (second_from < 0 || second_from >= r.seconds) {
    std::fprintf(stderr, "incremental_checkpoint_bench: no progress event at step %llu\n",
                 static_cast<unsigned long long>(epoch));
    std::exit(1);
  }
  warm_run w;
  w.examples_per_second = static_cast<double>(epoch * cfg.training.workers * cfg.training.batch_size) /
                          (r.seconds - second_from);
  w.write_cpu_share = r.checkpoint_write_cpu_seconds / r.seconds / 2;
  w.checkpoints = r.checkpoints;
  return w;
}

}  // namespace

void bench_cost_warm(uint64_t examples, uint64_t vocabulary, size_t repeats, double seconds) {
  auto m = make_model(vocabulary, examples, true);
  const chain_options defaults{}, longer{16, 2.0};
  std::vector<double> none, inc, inc_long, cpu, cpu_long;
  // Round 0 begins without checkpoints: its second epoch's speed sets the interval.
  none.push_back(run_warm(m, 0, defaults, "warm-none").examples_per_second);
  const uint64_t every = std::max<uint64_t>(1, static_cast<uint64_t>(none.back() / 256.0 * seconds));
  uint64_t checkpoints = 0;
  for (size_t i = 0; i < repeats; ++i) {
    if (i > 0)
      none.push_back(run_warm(m, 0, defaults, "warm-none").examples_per_second);
    auto a = run_warm(m, every, defaults, "warm-incremental");
    auto b = run_warm(m, every, longer, "warm-longer");
    inc.push_back(a.examples_per_second), cpu.push_back(a.write_cpu_share);
    inc_long.push_back(b.examples_per_second), cpu_long.push_back(b.write_cpu_share);
    checkpoints = a.checkpoints;
  }
  std::printf("== checkpoint cost over the second epoch (the model has met every ID of its rows), ctr-fm, "
              "vocabulary %.0e, %llu training rows, 2 epochs, 2 shards, 2 workers of batch 128, BSP; a checkpoint "
              "every %llu steps (%llu a run); %zu rounds\n",
              static_cast<double>(vocabulary), static_cast<unsigned long long>(examples),
              static_cast<unsigned long long>(every), static_cast<unsigned long long>(checkpoints), repeats);
  const char* row = "%-58s %-16s %-12s %s\n";
  std::printf(row, "run", "examples/s", "ratio", "write CPU");
  std::printf(row, "no checkpoints (ceiling)", range(none, 1, "%.0f").c_str(), "1", "-");
  std::printf(row, "incremental, defaults (full_every 8, delta_fraction 0.5)", range(inc, 1, "%.0f").c_str(),
              range(ratios(inc, none), 1, "%.3f").c_str(), range(cpu, 100, "%.1f%%").c_str());
  std::printf(row, "incremental, longer chains (16, 2.0)", range(inc_long, 1, "%.0f").c_str(),
              range(ratios(inc_long, none), 1, "%.3f").c_str(), range(cpu_long, 100, "%.1f%%").c_str());
  std::printf("(examples/s of the second epoch: from the progress event at the first epoch's end to the run's "
              "end; ratio: each round's over that round's run without checkpoints, goal >= 0.98; write CPU: "
              "the shards' writing threads' CPU over 2 cores' run time, both epochs)\n\n");
}

}  // namespace keel::incremental_bench
