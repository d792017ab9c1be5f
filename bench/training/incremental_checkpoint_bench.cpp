// Incremental checkpoints on the CTR models (issue 20, item 4), each figure
// beside a ceiling measured in the same run:
//  bytes:   the same BSP run twice, every checkpoint full (full_every 1) and
//           with the defaults (bases and deltas), on ctr-lr and ctr-fm over
//           their Zipf IDs; the bytes of the snapshot files each checkpoint
//           adds (its manifest's entries: a delta's own file, not its
//           chain), incremental over full (goal: at most a fifth); the mean
//           chain length and the share of bases. And what a checkpoint sends
//           the coordinator: the shards' parts (a checkpoint_manifest_msg of
//           one entry, built as a shard builds it from the manifest's
//           entries) and the manifest file it writes, at two vocabularies
//           (model sizes): the goal is that they do not grow with the model.
//  cost:    ctr-fm with a big vocabulary, a checkpoint every 1.5 s of the
//           first run without checkpoints (slower runs space them more):
//           examples/s with incremental checkpoints and with full ones
//           beside the same run without checkpoints (the ceiling; its
//           replay logs bounded); alternating rounds, ranges over them
//           (goal: incremental costs at most 2%).
//  warm:    the same cost over a second epoch, once the model has met every
//           ID of its rows (incremental_warm_bench.cpp).
//  restore: a shard of about 1 GB restored from its chain and from its
//           base alone (incremental_restore_bench.cpp; goal: the chain
//           within 1.2x of read(2) + CRC32C of its files).
// Usage: incremental_checkpoint_bench [what=all|bytes|cost|warm|restore]
//          [repeats=2] [cost_examples=1000000] [bytes_examples=500000]
//          [cost_vocabulary=10000000] [seconds_between_checkpoints=1.5]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench/training/incremental_bench.hpp"

using namespace keel;
using namespace keel::incremental_bench;

namespace {

// --- bytes: what each checkpoint adds -----------------------------------

struct checkpoint_bytes {
  std::map<uint64_t, uint64_t> added;  // checkpoint -> bytes of its new snapshot files
  uint64_t files = 0, bases = 0, links = 0;
  uint64_t part_bytes = 0;      // the shards' parts, summed over checkpoints
  uint64_t manifest_bytes = 0;  // the manifest files, summed
};

// The part a shard sends for `e` (parameter_shard.cpp's part_of).
size_t part_size(const checkpoint_manifest& m, const manifest_entry& e) {
  size_t words = 40 + e.file.size() / 8;
  for (auto& l : e.chain) words += 6 + l.file.size() / 8;
  auto part = build<schema::CheckpointManifest>(words, [&](schema::CheckpointManifest::Builder b) {
    b.setCheckpoint(m.checkpoint);
    b.setStep(m.step);
    b.setRunId(m.run.run_id);
    b.setConfigHash(m.run.config_hash);
    set_entry(b.initShards(1)[0], e);
  });
  return part.frame()->encoded_size_bytes();
}

// The checkpoints from `first` on.
checkpoint_bytes scan(const fs::path& dir, uint64_t first = 0) {
  checkpoint_bytes out;
  for_each_manifest(dir, [&](const fs::path& p, const checkpoint_manifest& m) {
    if (m.checkpoint < first)
      return;
    out.manifest_bytes += fs::file_size(p);
    for (auto& e : m.shards) {
      out.added[m.checkpoint] += e.bytes;
      out.files += 1;
      out.bases += e.chain.empty() ? 1 : 0;
      out.links += e.chain.size() + 1;
      out.part_bytes += part_size(m, e);
    }
  });
  return out;
}

struct bytes_row {
  double full = 0, incremental = 0;  // mean bytes a checkpoint adds
  size_t checkpoints = 0;
  checkpoint_bytes inc;
  uint64_t model = 0;
  uint64_t every = 0;
};

// Over `epochs` epochs, 16 checkpoints an epoch, counting those of the last
// epoch only: with 2, a model that has met every ID of its training rows
// (it no longer grows: deltas hold updated rows, not new ones).
bytes_row bytes_of(const std::shared_ptr<const ctr_model>& m, chain_options opts = {}, uint32_t epochs = 1) {
  bytes_row row;
  const uint64_t steps = steps_per_epoch(m->num_train_examples(), 2, 128);
  row.every = std::max<uint64_t>(1, steps / 16);
  const uint64_t first = (epochs - 1) * steps / row.every + 1;  // the first checkpoint counted
  checkpoint_bytes full, inc;
  for (uint32_t full_every : {1u, opts.full_every}) {
    auto cfg = config_of(m, row.every, full_every, bench_dir("bytes"), 100000);
    cfg.training.steps = steps * epochs;
    cfg.checkpoints.incremental.delta_fraction = opts.delta_fraction;
    auto r = run_job(cfg);
    (full_every == 1 ? full : inc) = scan(cfg.checkpoints.dir, first);
    row.model = model_bytes(r);
    fs::remove_all(cfg.checkpoints.dir);
  }
  uint64_t f = 0, i = 0;
  for (auto& [id, b] : full.added) {
    auto it = inc.added.find(id);
    if (it == inc.added.end())
      continue;
    f += b;
    i += it->second;
    row.checkpoints += 1;
  }
  if (row.checkpoints == 0) {
    std::fprintf(stderr, "incremental_checkpoint_bench: the two runs share no checkpoint\n");
    std::exit(1);
  }
  row.full = static_cast<double>(f) / row.checkpoints;
  row.incremental = static_cast<double>(i) / row.checkpoints;
  row.inc = inc;
  return row;
}

void print_bytes_row(const std::string& name, uint64_t vocabulary, const bytes_row& r) {
  const auto& c = r.inc;
  const double n = static_cast<double>(c.added.size());
  std::printf("%-7s %9.0e %9.1f %5llu %4zu %10.2f %10.2f %6.3f %6.2f %6.2f %8.0f %9.0f\n", name.c_str(),
              static_cast<double>(vocabulary), r.model / 1e6, static_cast<unsigned long long>(r.every),
              r.checkpoints, r.full / 1e6, r.incremental / 1e6, r.incremental / r.full,
              static_cast<double>(c.links) / c.files, static_cast<double>(c.bases) / c.files,
              c.part_bytes / static_cast<double>(c.files), c.manifest_bytes / n);
}

void bench_bytes(uint64_t examples) {
  std::printf("== bytes a checkpoint adds (its snapshot files; a delta's own file), the same BSP run with every "
              "checkpoint full (the ceiling) and with the defaults (full_every %u, delta_fraction %.2f); %llu "
              "training rows, 1 epoch, 2 shards, 2 workers of batch 128, AdaGrad\n",
              chain_options{}.full_every, chain_options{}.delta_fraction,
              static_cast<unsigned long long>(examples));
  std::printf("%-7s %9s %9s %5s %4s %10s %10s %6s %6s %6s %8s %9s\n", "model", "vocab", "model MB", "every",
              "ckpt", "full MB", "incr MB", "ratio", "chain", "bases", "part B", "manifst B");
  for (bool fm : {false, true}) {
    auto m = make_model(10'000'000, examples, fm);
    print_bytes_row(m->name(), 10'000'000, bytes_of(m));
  }
  // The coordinator's share at a model 100 times smaller.
  auto small = make_model(100'000, examples, true);
  print_bytes_row(small->name(), 100'000, bytes_of(small));
  // What a longer chain would write (restores then read more).
  auto fm = make_model(10'000'000, examples, true);
  print_bytes_row("fm 16/2", 10'000'000, bytes_of(fm, chain_options{16, 2.0}));
  // A model that has stopped growing: the second epoch's checkpoints.
  print_bytes_row("fm ep 2", 10'000'000, bytes_of(fm, {}, 2));
  print_bytes_row("16/2 ep2", 10'000'000, bytes_of(fm, chain_options{16, 2.0}, 2));
  std::printf("(fm 16/2: ctr-fm with full_every 16, delta_fraction 2.0. fm ep 2: ctr-fm over 2 epochs, the second "
              "epoch's checkpoints only (every ID of the training rows has its row by then); 16/2 ep2: both. ratio: incremental / full, goal <= 0.2; chain: mean files a restore of a checkpoint reads; "
              "bases: the share of files that are bases; part B: a shard's part sent to the coordinator, mean; "
              "manifst B: the manifest file, mean. Goal: part and manifest independent of the model's size)\n\n");
}

}  // namespace

namespace {

// --- cost: examples/s with checkpoints every few seconds ---------------

struct cost_runs {
  std::vector<double> none, incremental, full;   // examples/s
  std::vector<double> none_cpu, inc_cpu, full_cpu;  // CPU seconds of the process per million examples
  std::vector<double> inc_interval, full_interval;  // seconds between checkpoints
  std::vector<double> inc_write_share, full_write_share;  // checkpoint_write_seconds / seconds
  std::vector<double> inc_wait_share, full_wait_share;    // window_wait_seconds / seconds / workers
  std::vector<double> inc_cpu_share, full_cpu_share;      // checkpoint_write_cpu_seconds / (2 cores x seconds)
  checkpoint_bytes inc_files;  // the last incremental run's checkpoints
  uint64_t every = 0, model = 0, checkpoints = 0;
};

void run_cost(cost_runs& c, const std::shared_ptr<const ctr_model>& m, int kind) {
  const char* names[] = {"cost-none", "cost-incremental", "cost-full"};
  auto cfg = config_of(m, kind == 0 ? 0 : c.every, kind == 2 ? 1 : chain_options{}.full_every, bench_dir(names[kind]),
                       8);
  const double cpu0 = cpu_now();
  auto r = run_job(cfg);
  const double cpu = (cpu_now() - cpu0) * 1e6 / static_cast<double>(m->num_train_examples());
  (kind == 0 ? c.none_cpu : kind == 1 ? c.inc_cpu : c.full_cpu).push_back(cpu);
  c.model = model_bytes(r);
  if (kind == 0) {
    c.none.push_back(r.samples_per_second);
    fs::remove_all(cfg.checkpoints.dir);
    return;
  }
  const double interval = r.checkpoints ? r.seconds / static_cast<double>(r.checkpoints) : 0;
  const double share = r.checkpoint_write_seconds / r.seconds;
  const double wait = r.window_wait_seconds / r.seconds / cfg.training.workers;
  (kind == 1 ? c.inc_wait_share : c.full_wait_share).push_back(wait);
  (kind == 1 ? c.inc_cpu_share : c.full_cpu_share).push_back(r.checkpoint_write_cpu_seconds / r.seconds / 2);
  (kind == 1 ? c.incremental : c.full).push_back(r.samples_per_second);
  (kind == 1 ? c.inc_interval : c.full_interval).push_back(interval);
  (kind == 1 ? c.inc_write_share : c.full_write_share).push_back(share);
  c.checkpoints = r.checkpoints;
  if (kind == 1)
    c.inc_files = scan(cfg.checkpoints.dir);
  fs::remove_all(cfg.checkpoints.dir);
}

void bench_cost(uint64_t examples, uint64_t vocabulary, size_t repeats, double seconds) {
  auto m = make_model(vocabulary, examples, true);
  cost_runs c;
  // Round 0 begins without checkpoints: its speed sets the interval.
  run_cost(c, m, 0);
  const double steps_per_second = c.none.back() / 256.0;
  c.every = std::max<uint64_t>(1, static_cast<uint64_t>(steps_per_second * seconds));
  run_cost(c, m, 2);
  run_cost(c, m, 1);
  for (size_t i = 1; i < repeats; ++i)
    for (int kind : (i % 2 == 1 ? std::vector<int>{1, 2, 0} : std::vector<int>{0, 2, 1})) run_cost(c, m, kind);
  std::printf("== checkpoint cost, ctr-fm, vocabulary %.0e, %llu training rows (model %.0f MB of values and "
              "AdaGrad state), 2 shards, 2 workers of batch 128, BSP; a checkpoint every %llu steps (%llu "
              "checkpoints a run); %zu rounds, alternating, ranges over them\n",
              static_cast<double>(vocabulary), static_cast<unsigned long long>(examples), c.model / 1e6,
              static_cast<unsigned long long>(c.every), static_cast<unsigned long long>(c.checkpoints), repeats);
  const char* row = "%-47s %-14s %-12s %-10s %-12s %-10s %-12s %-12s %s\n";
  std::printf(row, "run", "examples/s", "ratio", "CPU s/M ex", "ratio", "s/ckpt", "write share", "write CPU",
              "window wait");
  std::printf(row, "no checkpoints (ceiling; logs bounded 64 MiB)", range(c.none, 1, "%.0f").c_str(), "1",
              range(c.none_cpu, 1, "%.1f").c_str(), "1", "-", "-", "-", "-");
  std::printf(row, "incremental (full_every 8, delta_fraction 0.5)", range(c.incremental, 1, "%.0f").c_str(),
              range(ratios(c.incremental, c.none), 1, "%.3f").c_str(), range(c.inc_cpu, 1, "%.1f").c_str(),
              range(ratios(c.none_cpu, c.inc_cpu), 1, "%.3f").c_str(), range(c.inc_interval, 1, "%.1f").c_str(),
              range(c.inc_write_share, 100, "%.0f%%").c_str(), range(c.inc_cpu_share, 100, "%.0f%%").c_str(),
              range(c.inc_wait_share, 100, "%.1f%%").c_str());
  std::printf(row, "full (full_every 1)", range(c.full, 1, "%.0f").c_str(),
              range(ratios(c.full, c.none), 1, "%.3f").c_str(), range(c.full_cpu, 1, "%.1f").c_str(),
              range(ratios(c.none_cpu, c.full_cpu), 1, "%.3f").c_str(), range(c.full_interval, 1, "%.1f").c_str(),
              range(c.full_write_share, 100, "%.0f%%").c_str(), range(c.full_cpu_share, 100, "%.0f%%").c_str(),
              range(c.full_wait_share, 100, "%.1f%%").c_str());
  const auto& f = c.inc_files;
  uint64_t added = 0;
  for (auto& [id, b] : f.added) added += b;
  std::printf("last incremental run: %zu checkpoints of %.0f MB on average, %.0f%% of files bases, chains of %.2f "
              "files; a shard's part %.0f B, the manifest %.0f B on average\n",
              f.added.size(), added / 1e6 / f.added.size(), 100.0 * f.bases / f.files,
              static_cast<double>(f.links) / f.files, f.part_bytes / static_cast<double>(f.files),
              f.manifest_bytes / static_cast<double>(f.added.size()));
  std::printf("(ratio: each round's examples/s over that round's run without checkpoints; goal: incremental "
              ">= 0.98. CPU s/M ex: this process's CPU seconds (all threads, start-up and scoring included) per "
              "million training examples, less sensitive to other load than examples/s; its ratio: the run "
              "without checkpoints' over this one's. s/ckpt: the run's seconds over its checkpoints. write share: job_result's "
              "checkpoint_write_seconds (the shards' file writes, wall, summed) over the run's seconds; write "
              "CPU: their writing threads' CPU over 2 cores' run time; window wait: the steps the checkpoint window held a worker back, per worker, over the run's seconds)\n\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as it comes
  const std::string what = argc > 1 ? argv[1] : "all";
  const size_t repeats = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2;
  const uint64_t cost_examples = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1'000'000;
  const uint64_t bytes_examples = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 500'000;
  const uint64_t vocabulary = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 10'000'000;
  const double seconds = argc > 6 ? std::strtod(argv[6], nullptr) : 1.5;
  if (what != "all" && what != "bytes" && what != "cost" && what != "warm" && what != "restore") {
    std::fprintf(stderr, "incremental_checkpoint_bench: what must be all, bytes, cost, warm or restore, not %s\n",
                 what.c_str());
    return 2;
  }
  if (repeats == 0 || cost_examples < 100'000 || bytes_examples < 100'000 || vocabulary < 1000 ||
      !(seconds > 0)) {
    std::fprintf(stderr, "incremental_checkpoint_bench: repeats and seconds must be positive, the example "
                         "counts at least 100000, the vocabulary at least 1000\n");
    return 2;
  }
  if (what == "all" || what == "bytes")
    bench_bytes(bytes_examples);
  if (what == "all" || what == "cost")
    bench_cost(cost_examples, vocabulary, repeats, seconds);
  if (what == "all" || what == "warm")
    bench_cost_warm(cost_examples, vocabulary, repeats, seconds);
  if (what == "all" || what == "restore") {
    auto source = restore_source(cost_examples, vocabulary);
    bench_restore(source, repeats);
    fs::remove_all(source.checkpoints.dir);
  }
  return 0;
}
