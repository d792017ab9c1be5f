// `keel chaos`: runs N seeded random fault plans against short training
// runs and checks keel's promises on each (actors/chaos/chaos.hpp). Prints one
// row per seed and exits 1 if any invariant broke, with the command that
// replays the failing seed.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "actors/chaos/chaos.hpp"
#include "actors/keel.hpp"
#include "cli_flags.hpp"
#include "commands.hpp"
#include "job_builder.hpp"

namespace keel::cli {

namespace {

struct chaos_flags {
  uint64_t seeds = 20, first = 1, steps = 60;
  uint32_t faults = 4;
  std::string model_name = "probe", consistency_text = "bsp", data_dir, mix_text = "all";
};

// Reads the flags into `f` and builds the runs' base configuration into
// `opts`; a status when the command ends here (help, bad usage, no model).
std::optional<int> set_up(const args& a, chaos_flags& f, chaos_options& opts) {
  command_flags flags{"chaos", po::options_description(), {}, {}};
  flags.visible.add_options()("help", "show this help")
    ("seeds", number_flag<uint64_t>(&f.seeds, "N", 1, 1000000), "how many seeds to run")
    ("first-seed", number_flag(&f.first, "S"), "the first seed")
    ("model", text_flag(&f.model_name, "NAME"), "probe | sparse-lr | mnist-softmax | mnist-mlp")
    ("consistency", text_flag(&f.consistency_text, "RULE"), "bsp | ssp:S | asp")
    ("steps", number_flag<uint64_t>(&f.steps, "N", 20, 1000000), "steps per run")
    ("faults", number_flag<uint32_t>(&f.faults, "N", 0, 10000), "faults per run")
    ("mix", text_flag(&f.mix_text, "FAMILIES"),
     "fault families: kills,supervisors,messages,storage,timed or all")
    ("data-dir", text_flag(&f.data_dir, "DIR", false),
     "dataset cache for MNIST models (default: ~/.cache/keel)");
  po::variables_map vm;
  if (auto status = parse_flags(flags, a, vm))
    return status;
  if (vm.count("help")) {
    print_help(std::cout, "keel chaos [FLAGS]",
               "Runs seeded random fault plans against short runs and checks keel's invariants\n"
               "on each. Exit status: 0 all held, 1 an invariant broke, 2 bad usage.",
               flags.visible);
    return 0;
  }
  if (auto err = parse_fault_families(f.mix_text, opts.mix))
    return usage_error("chaos", "--mix", error_text(err));
  model_options mo;
  mo.data_dir = f.data_dir.empty() ? default_data_dir() : std::filesystem::path(f.data_dir);
  mo.sparse_lr.train_rows = 20000;  // short runs: a smaller synthetic data set
  mo.sparse_lr.test_rows = 2000;
  mo.probe.table_keys = 4;  // the probe with its embedding table: rows are checked too
  job_choices choices;
  choices.model = f.model_name;
  choices.consistency = f.consistency_text;
  choices.lr = f.model_name == "probe" ? 1.0f : 0.05f;
  auto& c = opts.base;
  if (auto status = apply_choices(choices, mo, "chaos", c))
    return status;
  c.training.steps = f.steps;
  c.training.batch_size = 16;
  c.checkpoints.every = 10;
  c.recovery.request_timeout = std::chrono::milliseconds(200);
  c.checkpoints.dir = std::filesystem::temp_directory_path();
  opts.mix.faults = f.faults;
  opts.mix.first_step = 3;
  opts.mix.last_step = f.steps - 5;
  return std::nullopt;
}

// The runs' totals, and the summary printed after the last row.
struct chaos_tally {
  uint64_t seeds = 0, faults = 0, planned = 0, recoveries = 0;
  int64_t lost = 0;
  int broken = 0;
  std::map<std::string, uint64_t> fault_counts;                // by family, kills by victim kind
  std::map<std::string, std::vector<int64_t>> recovery_us;     // by victim kind

  void add(const chaos_run& r) {
    ++seeds;
    faults += r.faults;
    planned += r.planned;
    recoveries += r.recoveries;
    lost += r.lost_updates;
    broken += r.ok() ? 0 : 1;
    for (auto& [kind, us] : r.recovery_us)
      recovery_us[kind].push_back(us);
    if (auto plan = parse_fault_plan(r.plan))
      for (auto& f : *plan)
        ++fault_counts[f.kind == fault_kind::kill ? "kill " + recovery_kind(f.target) : to_string(f.kind)];
  }

  void print_summary() {
    std::string kinds;
    for (auto& [kind, n] : fault_counts)
      kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    std::printf("keel chaos: %llu seeds, %llu of %llu planned faults injected (planned: %s), "
                "%llu recoveries, %lld lost updates, %d broke an invariant\n",
                static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(faults),
                static_cast<unsigned long long>(planned), kinds.c_str(),
                static_cast<unsigned long long>(recoveries), static_cast<long long>(lost), broken);
    for (auto& entry : recovery_us) {
      auto& kind = entry.first;
      auto& samples = entry.second;  // a named reference: clang 14 cannot capture a structured binding
      std::sort(samples.begin(), samples.end());
      auto at = [&](double q) {
        return samples[std::min(samples.size() - 1, static_cast<size_t>(q * samples.size()))];
      };
      std::printf("  recovery of %-12s n=%-5zu median %7.2f ms  p99 %7.2f ms\n", kind.c_str(),
                  samples.size(), at(0.5) / 1000.0, at(0.99) / 1000.0);
    }
  }
};

// One row per seed; a broken one adds what broke and the command that replays it.
void print_row(const chaos_run& r, const chaos_flags& f, const job_config& c) {
  std::printf("%6llu  %-9llu %-8lld %-6s %-9s %7.0f  %s\n", static_cast<unsigned long long>(r.seed),
              static_cast<unsigned long long>(r.recoveries), static_cast<long long>(r.lost_updates),
              r.exactly_once ? "yes" : "NO", c.training.rule.kind != consistency_kind::bsp ? "n/a"
                                               : r.bit_identical ? "yes" : "NO",
              r.seconds * 1000, r.plan.c_str());
  if (!r.ok())
    std::printf("        BROKEN: %s\n        replay: keel train --model %s --consistency %s --steps %llu "
                "--batch 16 --lr %g --checkpoint-every 10 --request-timeout %lld --faults '%s'\n",
                r.problem.c_str(), f.model_name.c_str(), f.consistency_text.c_str(),
                static_cast<unsigned long long>(f.steps), static_cast<double>(c.training.optimizer.lr),
                static_cast<long long>(c.recovery.request_timeout.count()), r.plan.c_str());
  std::fflush(stdout);
}

}  // namespace

int chaos(const args& a) {
  chaos_flags f;
  chaos_options opts;
  if (auto status = set_up(a, f, opts))
    return *status;
  std::printf("%6s  %-9s %-8s %-6s %-9s %7s  %s\n", "seed", "recovered", "lost", "once", "identical",
              "ms", "faults");
  chaos_tally tally;
  run_chaos(opts, f.first, f.seeds, [&](const chaos_run& r) {
    tally.add(r);
    print_row(r, f, opts.base);
  });
  tally.print_summary();
  return tally.broken == 0 ? 0 : 1;
}

}  // namespace keel::cli
