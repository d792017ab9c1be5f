// `keel train`: runs a training job of keel's parameter server in this
// process and prints its progress and result. With no arguments: MNIST MLP,
// 2 shards, 2 workers, BSP, checkpoints in a fresh temporary directory.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "actors/job/placement.hpp"
#include "actors/keel.hpp"
#include "cli_flags.hpp"
#include "commands.hpp"
#include "job_builder.hpp"
#include "messages/errors.hpp"
#include "models/probe_model.hpp"
#include "run_plot.hpp"
#include "run_report.hpp"
#include "train_args.hpp"
#include "train_flags.hpp"
#include "train_metrics.hpp"
#include "train_output.hpp"

namespace keel::cli {

namespace {

// Passes over the training set without --epochs or --steps: what the model
// needs to reach its target (the MNIST MLP 0.97 in 5, the others in 1).
uint64_t default_epochs(const std::string& model) {
  return model == "mnist-mlp" ? 5 : 1;
}

// The directory --resume names in `given` ("" if none).
std::string resume_dir_in(const args& given) {
  std::string dir;
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i] == "--resume" && i + 1 < given.size())
      dir = given[i + 1];
    else if (given[i].rfind("--resume=", 0) == 0)
      dir = given[i].substr(9);
  }
  return dir;
}

// The click-log models' own defaults, for the flags not given: AdaGrad (the
// rate default_lr gives them is AdaGrad's), the plain trainer's batch over 2
// workers whose gradients are averaged (so that a step is the plain
// trainer's step of batch 256: summed, they would be twice its gradient,
// which under AdaGrad is a quarter of its initial accumulator), and
// checkpoints far enough apart for tables of millions of rows.
void apply_model_defaults(train_flags& f, const po::variables_map& vm) {
  if (f.choices.model != "ctr-lr" && f.choices.model != "ctr-fm")
    return;
  auto given = [&](const char* flag) { return vm.count(flag) > 0 && !vm[flag].defaulted(); };
  if (!given("optimizer"))
    f.choices.optimizer = "adagrad";
  if (!given("batch"))
    f.cfg.training.batch_size = 128;
  if (!given("combine"))
    f.combine = "mean";
  if (!given("checkpoint-every"))
    f.cfg.checkpoints.every = 500;
}

// Flags that contradict each other or say nothing; an exit status when so.
std::optional<int> check_conflicts(const train_flags& f, const po::variables_map& vm) {
  auto given = [&](const char* flag) { return vm.count(flag) > 0 && !vm[flag].defaulted(); };
  if (given("quiet") && given("verbose"))
    return usage_error(f.command, "--quiet", "and --verbose contradict each other: choose one");
  for (auto flag : {"fault-rate", "fault-mix"})
    if (given(flag) && !given("random-faults"))
      return usage_error(f.command, std::string("--") + flag, "only shapes --random-faults, which is not given");
  for (auto [flag, text] : {std::pair{"faults", &f.faults_text}, {"kill", &f.kills_text}})
    if (given(flag) && text->empty())
      return usage_error(f.command, std::string("--") + flag, "empty: name at least one fault");
  return std::nullopt;
}

// --report and --plot go into a directory that exists, and are not one:
// found out now, not after the run (whose report would be lost).
std::optional<int> check_output_paths(const train_flags& f) {
  for (auto [flag, path] : {std::pair{"--report", f.report_path}, {"--plot", f.plot_path}}) {
    if (path.empty())
      continue;
    std::filesystem::path p(path);
    auto dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      return usage_error(f.command, flag, "'" + path + "': directory '" + dir.string() + "' does not exist");
    if (std::filesystem::is_directory(p, ec))
      return usage_error(f.command, flag, "'" + path + "' is a directory; name a file");
    if (::access(dir.c_str(), W_OK) != 0)
      return usage_error(f.command, flag, "'" + path + "': directory '" + dir.string() + "' is not writable");
  }
  return std::nullopt;
}

// --faults and --kill, in that order; an exit status when one is bad.
std::optional<int> add_planned_faults(const train_flags& f, job_config& cfg) {
  if (!f.faults_text.empty()) {
    auto plan = parse_fault_plan(f.faults_text);
    if (!plan)
      return usage_error(f.command, "--faults", error_text(plan.error()));
    cfg.faults.plan = *plan;
  }
  if (!f.kills_text.empty()) {
    auto k = parse_kill_shorthand(f.kills_text);
    if (!k)
      return usage_error(f.command, "--kill", error_text(k.error()));
    cfg.faults.plan.insert(cfg.faults.plan.end(), k->begin(), k->end());
  }
  return std::nullopt;
}

// --random-faults: a plan drawn from the seed over the run's steps (and its
// nodes, once a cluster's placement is set), added to cfg's.
std::optional<int> add_random_faults(const train_flags& f, bool quiet, placed_job_config& cfg) {
  fault_mix mix;
  if (auto err = parse_fault_families(f.mix_text, mix))
    return usage_error(f.command, "--fault-mix", error_text(err));
  mix.faults = static_cast<uint32_t>(std::max(1.0, std::round(f.fault_rate * cfg.training.steps / 100.0)));
  mix.first_step = std::max<uint64_t>(1, cfg.training.steps / 20);
  mix.last_step = std::max<uint64_t>(mix.first_step, cfg.training.steps - 1);
  mix.shards = cfg.training.shards;
  mix.workers = cfg.training.workers;
  mix.nodes = cfg.placement ? cfg.placement->nodes() : 0;
  if ((mix.node_faults || mix.membership) && mix.nodes == 0)
    return usage_error(f.command, "--fault-mix", "the nodes and membership families need node processes (keel cluster)");
  auto plan = random_fault_plan(f.random_seed, mix);
  if (!quiet)
    std::cout << "keel train: random faults from seed " << f.random_seed << ": " << to_string(plan)
              << std::endl;
  cfg.faults.plan.insert(cfg.faults.plan.end(), plan.begin(), plan.end());
  return std::nullopt;
}

// Removes the temporary checkpoint directory keel train made when the
// command returns, unless a failed run's checkpoints are in it (for --resume).
struct temp_checkpoint_dir {
  std::string path;  // empty: none made
  bool keep = false;
  ~temp_checkpoint_dir() {
    if (path.empty() || keep)
      return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec)
      std::cerr << "keel train: warning: cannot remove the temporary checkpoint directory " << path
                << ": " << ec.message() << "\n";
  }
};

// Where the checkpoints go: --resume's directory, --checkpoint-dir, or a new
// temporary one (recorded in `made`); an exit status when none can be had.
std::optional<int> choose_checkpoint_dir(train_flags& f, bool checkpoint_dir_given, job_config& cfg,
                                         temp_checkpoint_dir& made) {
  if (!f.resume_dir.empty()) {
    if (checkpoint_dir_given && f.checkpoint_dir != f.resume_dir)
      return usage_error(f.command, "--resume", "'" + f.resume_dir + "' and --checkpoint-dir '" +
                                                f.checkpoint_dir + "' name different directories");
    f.checkpoint_dir = f.resume_dir;
    cfg.checkpoints.resume = true;
  }
  if (f.checkpoint_dir.empty()) {
    char tmpl[] = "/tmp/keel-train-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::cerr << "keel " << f.command << ": cannot create a temporary checkpoint directory\n";
      return 1;
    }
    f.checkpoint_dir = tmpl;
    made.path = f.checkpoint_dir;
  }
  cfg.checkpoints.dir = f.checkpoint_dir;
  return std::nullopt;
}

// --workers: N, or MIN:MAX (keel cluster only: nodes may run out of room
// for a worker, training_config::min_workers). An exit status when refused.
std::optional<int> parse_workers(train_flags& f) {
  uint64_t min = 0, max = 0;
  if (auto why = parse_number_range(f.workers, config_bounds::workers.min, config_bounds::workers.max, min, max))
    return usage_error(f.command, "--workers", *why);
  const bool ranged = f.workers.find(':') != std::string::npos;
  if (ranged && f.command != "cluster")
    return usage_error(f.command, "--workers", "'" + f.workers + "' has a minimum, which is for keel cluster (whose "
                                               "nodes may have no room left for a worker); a job in one process "
                                               "always runs every worker");
  f.cfg.training.workers = static_cast<uint32_t>(max);
  f.cfg.training.min_workers = ranged && min < max ? static_cast<uint32_t>(min) : 0;
  return std::nullopt;
}

// The job_config of keel train's flags: the model, rule and optimizer by
// name (demos/job_builder.hpp), the run's length, a cluster's placement
// (`setup`), and the fault plan. An exit status when something is refused.
std::optional<int> build_config(train_flags& f, const po::variables_map& vm, const std::string& program,
                                const job_setup& setup) {
  auto& cfg = f.cfg;
  if (vm.count("lr"))
    f.choices.lr = f.lr;
  apply_model_defaults(f, vm);
  if (auto status = parse_workers(f))
    return status;
  if (auto status = check_conflicts(f, vm))
    return status;
  if (auto status = check_output_paths(f))
    return status;
  if (auto status = add_planned_faults(f, cfg))
    return status;
  auto combine = parse_gradient_combine(f.combine);
  if (!combine)
    return usage_error(f.command, "--combine", error_text(combine.error()));
  cfg.training.combine = *combine;
  if (f.scorers != "workers" && f.scorers != "coordinator")
    return usage_error(f.command, "--scorers", "'" + f.scorers + "': say workers or coordinator");
  cfg.evaluation.on_workers = f.scorers == "workers";
  model_options mo;
  mo.data_dir = f.data_dir.empty() ? default_data_dir() : std::filesystem::path(f.data_dir);
  mo.mnist_limits.train = f.train_limit;
  mo.mnist_limits.test = f.test_limit;
  // The click log's rows are drawn, not read: the limits shorten its split.
  if (f.train_limit > 0)
    mo.ctr.train_examples = std::min(mo.ctr.train_examples, f.train_limit);
  if (f.test_limit > 0)
    mo.ctr.test_examples = std::min(mo.ctr.test_examples, f.test_limit);
  if (auto status = apply_choices(f.choices, mo, f.command, cfg))
    return status;
  auto examples = cfg.training_model->num_train_examples();
  auto spe = steps_per_epoch(examples, cfg.training.workers, cfg.training.batch_size);
  if (spe == 0)
    return usage_error(f.command, "",
                       "batch " + std::to_string(cfg.training.batch_size) + " with " +
                         std::to_string(cfg.training.workers) + " workers leaves no full batch in " +
                         std::to_string(examples) + (examples == 1 ? " example" : " examples") +
                         (f.train_limit > 0 ? " (--train-limit " + std::to_string(f.train_limit) + ")" : ""));
  cfg.training.steps = f.steps;
  if (cfg.training.steps == 0)
    cfg.training.steps = (f.epochs > 0 ? f.epochs : default_epochs(f.choices.model)) * spe;
  if (!f.worker_changes.empty()) {
    auto schedule = worker_schedule::parse(f.worker_changes, cfg.training.workers, cfg.training.steps);
    if (!schedule)
      return usage_error(f.command, "--worker-changes", error_text(schedule.error()));
    cfg.training.schedule = std::move(*schedule);
  }
  // The plan's actors exist in this job, checked before a cluster starts
  // its nodes (its node targets once they have started, below).
  auto all_but_nodes = cfg.faults.plan;
  all_but_nodes.erase(std::remove_if(all_but_nodes.begin(), all_but_nodes.end(),
                                     [](const fault& x) { return x.is_node_fault(); }),
                      all_but_nodes.end());
  if (auto err = check_fault_plan(all_but_nodes, cfg.training.shards, cfg.training.workers))
    return usage_error(f.command, f.faults_text.empty() ? "--kill" : "--faults", error_text(err));
  // A cluster's placement first: random plans may target its nodes.
  if (setup)
    if (auto err = setup(cfg, f.choices.model, mo)) {
      std::cerr << program << ": " << describe(err) << "\n";
      return 1;
    }
  if (vm.count("random-faults"))
    if (auto status = add_random_faults(f, vm.count("quiet") > 0, cfg))
      return status;
  // Every target exists in this job: a usage error now, not a failed run.
  if (auto err = check_fault_plan(cfg.faults.plan, cfg.training.shards, cfg.training.workers,
                                  cfg.placement ? cfg.placement->nodes() : 0))
    return usage_error(f.command, f.faults_text.empty() ? "--kill" : "--faults", error_text(err));
  cfg.recovery.request_timeout = std::chrono::milliseconds(f.request_timeout_ms);
  cfg.recovery.stall_timeout = std::chrono::milliseconds(f.stall_timeout_ms);
  cfg.checkpoints.max_log_bytes = f.replay_log_mb << 20;
  cfg.checkpoints.stream_above_bytes = f.stream_mb << 20;
  cfg.checkpoints.storage_deadline = std::chrono::seconds(f.storage_deadline_s);
  // What job::start would refuse, as a usage error naming the flag: the
  // flags' own bounds are these, but a value the command computes (the
  // model's learning rate, --epochs' steps) is checked here.
  if (auto problem = check_bounds(cfg))
    return usage_error(f.command, flag_of_field(problem->field), problem->field + ": " + problem->why);
  return std::nullopt;
}

// What keel train says before the run: its shape, and how much memory the
// replay logs will hold without checkpoints.
void announce(const train_flags& f, bool quiet) {
  auto& cfg = f.cfg;
  if (!quiet)
    std::cout << "keel train: " << f.choices.model << ", " << cfg.training.shards << " shards, " << cfg.training.workers
              << " workers, " << to_string(cfg.training.rule) << ", " << to_string(cfg.training.optimizer.kind)
              << " lr " << cfg.training.optimizer.lr << ", " << cfg.training.steps << " steps of batch " << cfg.training.batch_size
              << (cfg.training.combine == gradient_combine::mean ? " (the workers' gradients averaged)" : "")
              << (cfg.training.schedule.elastic() ? ", workers joining and leaving: " + cfg.training.schedule.to_string() : "")
              << ", checkpoints in " << f.checkpoint_dir << std::endl;
  if (cfg.checkpoints.every == 0) {
    // Every push stays in its worker's replay log: say how much that is.
    double mb = static_cast<double>(cfg.training.steps) * cfg.training.workers *
                static_cast<double>(cfg.training_model->layout().dense_size()) * 4 / 1e6;
    auto amount = mb >= 1 ? std::to_string(static_cast<uint64_t>(mb)) + " MB"
                          : std::to_string(static_cast<uint64_t>(mb * 1000)) + " kB";
    auto bound_mb = replay_log_bound(cfg.checkpoints, cfg.training.workers) >> 20;
    std::cerr << "keel train: warning: without checkpoints the workers keep every push in memory, about "
              << amount << " of dense gradients over this run, and the rows they push to embedding tables, up to "
              << bound_mb << " MiB a worker (--replay-log-mb; past it the oldest pushes go, and a shard "
              << "restarted later rolls the run back to step 0; --checkpoint-every N bounds it)\n";
  }
}

// --report and --plot; 1 if one cannot be written.
int write_outputs(const train_flags& f, const job_summary& s) {
  if (f.report_path.empty() && f.plot_path.empty())
    return 0;
  auto report = make_report(f.cfg, f.choices.model, s);
  auto err = f.report_path.empty() ? caf::error{} : write_report(report, f.report_path);
  if (!err && !f.plot_path.empty())
    err = write_plot(report, f.plot_path);
  if (err) {
    std::cerr << "keel train: " << error_text(err) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int train(const args& given) {
  return train_with(given, "keel train", nullptr);
}

int train_with(const args& given, const std::string& program, const job_setup& setup) {
  // --resume DIR: the run's recorded flags, with those given now replacing them.
  args a = given;
  if (auto dir = resume_dir_in(given); !dir.empty()) {
    auto recorded = load_train_args(dir);
    if (!recorded) {
      std::cerr << program << ": " << describe(recorded.error()) << "\n";
      return 1;
    }
    a = merge_train_args(*recorded, given);
  }
  train_flags f;
  f.command = program.rfind("keel ", 0) == 0 ? program.substr(5) : program;
  f.resume_dir = resume_dir_in(given);
  command_flags flags{f.command, po::options_description(), {}, {}};
  add_train_flags(flags.visible, f);
  train_metrics metrics;
  metrics.add_options(flags.visible);
  po::variables_map vm;
  if (auto status = parse_flags(flags, a, vm))
    return *status;
  if (vm.count("help")) {
    print_help(std::cout, "keel train [FLAGS]",
               "Trains a model on keel's parameter server in this process. Exit status: 0 trained,\n"
               "1 the training failed, 2 bad usage.",
               flags.visible);
    return 0;
  }
  auto& cfg = f.cfg;
  if (auto status = build_config(f, vm, program, setup))
    return *status;
  temp_checkpoint_dir made_dir;
  if (auto status = choose_checkpoint_dir(f, vm.count("checkpoint-dir") > 0, cfg, made_dir))
    return *status;
  bool quiet = vm.count("quiet") > 0;
  cfg.progress.every = quiet ? 0 : std::max<uint64_t>(1, cfg.training.steps / 10);
  cfg.progress.accuracy = !quiet && cfg.training_model->num_test_examples() > 0;
  if (quiet && metrics.enabled())
    cfg.progress.every = std::max<uint64_t>(1, cfg.training.steps / 100);  // metrics follow progress events
  if (auto err = metrics.start(std::cout); !err.empty()) {
    std::cerr << program << ": " << err << "\n";
    return 2;
  }
  announce(f, quiet);
  auto j = start_job(cfg);
  if (!j) {
    std::cerr << program << ": " << describe(j.error()) << "\n";
    metrics.finish(nullptr);  // the file's last line says the job failed
    return 1;
  }
  if (!cfg.checkpoints.resume)
    if (auto err = save_train_args(f.checkpoint_dir, a))
      std::cerr << "keel train: warning: " << describe(err) << " (--resume will need the flags again)\n";
  auto print = quiet ? std::function<void(const job_event&)>{} : event_printer(vm.count("verbose") > 0);
  (*j)->on_event([&metrics, print](const job_event& e) {
    metrics.observe(e);
    if (print)
      print(e);
  });
  auto r = (*j)->wait(std::chrono::seconds(f.timeout_s));
  // What the metrics, the printed result and the report show of the result.
  std::optional<job_summary> summary;
  if (r)
    summary = summarize(*r);
  auto metrics_error = metrics.finish(summary ? &*summary : nullptr);
  if (!metrics_error.empty())
    std::cerr << "keel train: " << metrics_error << "\n";
  j->reset();  // the job's actors are gone: nothing writes checkpoints any more
  if (!r) {
    std::cerr << program << ": training failed: " << describe(r.error()) << "\n";
    if (!made_dir.path.empty()) {
      made_dir.keep = true;
      std::cerr << program << ": its checkpoints stay in " << f.checkpoint_dir << " (--resume "
                << f.checkpoint_dir << " continues the run)\n";
    }
    return 1;
  }
  int status = metrics_error.empty() ? 0 : 1;
  if (print_result(cfg, *r, *summary, program, quiet) != 0)
    status = 1;
  if (int written = write_outputs(f, *summary))
    return written;
  return status;
}

}  // namespace keel::cli
