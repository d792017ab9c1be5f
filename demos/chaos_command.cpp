// `keel chaos`: runs N seeded random fault plans against short training
// runs and checks keel's promises on each (actors/chaos/chaos.hpp). Prints one
// row per seed and exits 1 if any invariant broke, with the command that
// replays the failing seed.
#include <algorithm>
#include <cstdio>
#include <map>
#include <filesystem>
#include <iostream>

#include "actors/chaos/chaos.hpp"
#include "actors/keel.hpp"
#include "cli_flags.hpp"
#include "commands.hpp"
#include "job_builder.hpp"

namespace keel::cli {

namespace {

std::string kinds_text(const std::map<std::string, uint64_t>& counts) {
  std::string s;
  for (auto& [kind, n] : counts)
    s += (s.empty() ? "" : ", ") + kind + " " + std::to_string(n);
  return s;
}

}  // namespace

int chaos(const args& a) {
  uint64_t seeds = 20, first = 1, steps = 60;
  uint32_t faults = 4;
  std::string model_name = "probe", consistency_text = "bsp", data_dir, mix_text = "all";
  chaos_options opts;
  command_flags flags{"chaos", po::options_description(), {}, {}};
  flags.visible.add_options()("help", "show this help")
    ("seeds", number_flag<uint64_t>(&seeds, "N", 1, 1000000), "how many seeds to run")
    ("first-seed", number_flag(&first, "S"), "the first seed")
    ("model", text_flag(&model_name, "NAME"), "probe | sparse-lr | mnist-softmax | mnist-mlp")
    ("consistency", text_flag(&consistency_text, "RULE"), "bsp | ssp:S | asp")
    ("steps", number_flag<uint64_t>(&steps, "N", 20, 1000000), "steps per run")
    ("faults", number_flag<uint32_t>(&faults, "N", 0, 10000), "faults per run")
    ("mix", text_flag(&mix_text, "FAMILIES"),
     "fault families: kills,supervisors,messages,storage,timed or all")
    ("data-dir", text_flag(&data_dir, "DIR", false),
     "dataset cache for MNIST models (default: ~/.cache/keel)");
  po::variables_map vm;
  if (auto status = parse_flags(flags, a, vm))
    return *status;
  if (vm.count("help")) {
    print_help(std::cout, "keel chaos [FLAGS]",
               "Runs seeded random fault plans against short runs and checks keel's invariants\n"
               "on each. Exit status: 0 all held, 1 an invariant broke, 2 bad usage.",
               flags.visible);
    return 0;
  }
  if (auto err = parse_fault_families(mix_text, opts.mix))
    return usage_error("chaos", "--mix", error_text(err));
  model_options mo;
  mo.data_dir = data_dir.empty() ? default_data_dir() : std::filesystem::path(data_dir);
  mo.sparse_lr.train_rows = 20000;  // short runs: a smaller synthetic data set
  mo.sparse_lr.test_rows = 2000;
  job_choices choices;
  choices.model = model_name;
  choices.consistency = consistency_text;
  choices.lr = model_name == "probe" ? 1.0f : 0.05f;
  auto& c = opts.base;
  if (auto status = apply_choices(choices, mo, "chaos", c))
    return *status;
  c.steps = steps;
  c.batch_size = 16;
  c.checkpoint_every = 10;
  c.request_timeout = std::chrono::milliseconds(200);
  c.checkpoint_dir = std::filesystem::temp_directory_path();
  opts.mix.faults = faults;
  opts.mix.first_step = 3;
  opts.mix.last_step = steps - 5;
  std::printf("%6s  %-9s %-8s %-6s %-9s %7s  %s\n", "seed", "recovered", "lost", "once", "identical",
              "ms", "faults");
  int broken = 0;
  uint64_t total_faults = 0, total_planned = 0, total_recoveries = 0;
  int64_t lost = 0;
  std::map<std::string, uint64_t> fault_counts;
  std::map<std::string, std::vector<int64_t>> recovery;
  run_chaos(opts, first, seeds, [&](const chaos_run& r) {
    total_faults += r.faults;
    total_planned += r.planned;
    total_recoveries += r.recoveries;
    lost += r.lost_updates;
    for (auto& [kind, us] : r.recovery_us)
      recovery[kind].push_back(us);
    if (auto plan = parse_fault_plan(r.plan))
      for (auto& f : *plan)
        ++fault_counts[f.kind == fault_kind::kill ? "kill " + recovery_kind(f.target) : to_string(f.kind)];
    std::printf("%6llu  %-9llu %-8lld %-6s %-9s %7.0f  %s\n", static_cast<unsigned long long>(r.seed),
                static_cast<unsigned long long>(r.recoveries), static_cast<long long>(r.lost_updates),
                r.exactly_once ? "yes" : "NO", c.rule.kind != consistency_kind::bsp ? "n/a"
                                                 : r.bit_identical ? "yes" : "NO",
                r.seconds * 1000, r.plan.c_str());
    if (!r.ok()) {
      ++broken;
      std::printf("        BROKEN: %s\n        replay: keel train --model %s --consistency %s --steps %llu "
                  "--batch 16 --lr %g --checkpoint-every 10 --request-timeout %lld --faults '%s'\n",
                  r.problem.c_str(), model_name.c_str(), consistency_text.c_str(),
                  static_cast<unsigned long long>(steps), static_cast<double>(c.optimizer.lr),
                  static_cast<long long>(c.request_timeout.count()), r.plan.c_str());
    }
    std::fflush(stdout);
  });
  std::printf("keel chaos: %llu seeds, %llu of %llu planned faults injected (planned: %s), "
              "%llu recoveries, %lld lost updates, %d broke an invariant\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(total_faults),
              static_cast<unsigned long long>(total_planned), kinds_text(fault_counts).c_str(), static_cast<unsigned long long>(total_recoveries),
              static_cast<long long>(lost), broken);
  for (auto& entry : recovery) {
    auto& kind = entry.first;
    auto& samples = entry.second;  // a named reference: clang 14 cannot capture a structured binding
    std::sort(samples.begin(), samples.end());
    auto at = [&](double q) { return samples[std::min(samples.size() - 1, static_cast<size_t>(q * samples.size()))]; };
    std::printf("  recovery of %-12s n=%-5zu median %7.2f ms  p99 %7.2f ms\n", kind.c_str(), samples.size(),
                at(0.5) / 1000.0, at(0.99) / 1000.0);
  }
  return broken == 0 ? 0 : 1;
}

}  // namespace keel::cli
