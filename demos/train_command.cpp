// `keel train`: runs a training job of keel's parameter server in this
// process and prints its progress and result. With no arguments: MNIST MLP,
// 2 shards, 2 workers, BSP, checkpoints in a fresh temporary directory.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <cmath>
#include <iostream>

#include "actors/keel.hpp"
#include "actors/placement.hpp"
#include "cli_flags.hpp"
#include "commands.hpp"
#include "train_args.hpp"
#include "messages/errors.hpp"
#include "models/probe_model.hpp"
#include "run_plot.hpp"
#include "run_report.hpp"
#include "train_metrics.hpp"

namespace keel::cli {

namespace {

// Learning rates that train each of keel's models well with plain SGD at
// batch 32 per worker. Shards sum the workers' gradients (each push counts
// once), so the rate is per worker gradient.
float default_lr(const std::string& model) {
  if (model == "probe")
    return 1.0f;  // the probe's pushes then add exactly 1.0 each
  if (model == "mnist-softmax")
    return 0.05f;
  if (model == "sparse-lr")
    return 0.2f;  // with --batch 64 and 2 epochs: within 5% of w*'s log loss
  return 0.1f;    // mnist-mlp: with its 5 default epochs, test accuracy >= 0.97
}

// Passes over the training set without --epochs or --steps: what the model
// needs to reach its target (the MNIST MLP 0.97 in 5, the others in 1).
uint64_t default_epochs(const std::string& model) {
  return model == "mnist-mlp" ? 5 : 1;
}

}  // namespace

int train(const args& given) {
  return train_with(given, "keel train", nullptr);
}

int train_with(const args& given, const std::string& program, const job_setup& setup) {
  // --resume DIR: the run's recorded flags, with those given now replacing them.
  args a = given;
  std::string resume_dir;
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i] == "--resume" && i + 1 < given.size())
      resume_dir = given[i + 1];
    else if (given[i].rfind("--resume=", 0) == 0)
      resume_dir = given[i].substr(9);
  }
  if (!resume_dir.empty()) {
    auto recorded = load_train_args(resume_dir);
    if (!recorded) {
      std::cerr << "keel train: " << describe(recorded.error()) << "\n";
      return 1;
    }
    a = merge_train_args(*recorded, given);
  }
  std::string model_name = "mnist-mlp", consistency_text = "bsp", optimizer_name = "sgd";
  std::string kills_text, faults_text, report_path, checkpoint_dir, data_dir;
  std::string mix_text = "all";
  uint64_t random_seed = 0;
  double fault_rate = 2.0;
  job_config cfg;
  uint64_t epochs = 0, steps = 0, timeout_s = 3600;
  uint64_t request_timeout_ms = static_cast<uint64_t>(cfg.request_timeout.count());
  uint64_t train_limit = 0, test_limit = 0;
  float lr = 0;
  std::string plot_path;
  command_flags flags{"train", po::options_description(), {}, {}};
  flags.visible.add_options()("help", "show this help")
    ("model", text_flag(&model_name, "NAME"), "mnist-mlp | mnist-softmax | sparse-lr | probe")
    ("shards", number_flag<uint32_t>(&cfg.shards, "N", 1, 1024), "parameter shards")
    ("workers", number_flag<uint32_t>(&cfg.workers, "N", 1, 1024), "workers")
    ("consistency", text_flag(&consistency_text, "RULE"), "bsp | ssp:S | asp")
    ("optimizer", text_flag(&optimizer_name, "NAME"), "sgd | momentum | adagrad | adam")
    ("lr", number_flag<float>(&lr, "X", 0, 1e6, false), "learning rate (default: the model's own)")
    ("batch", number_flag<uint32_t>(&cfg.batch_size, "N", 1, 1 << 20), "examples per worker step")
    ("epochs", number_flag<uint64_t>(&epochs, "N", 1, 1000000, false),
     "passes over the training set (default: 5 for mnist-mlp, 1 for the others)")
    ("steps", number_flag<uint64_t>(&steps, "N", 1, uint64_t{1} << 40, false),
     "global steps per worker (default: --epochs worth)")
    ("seed", number_flag(&cfg.seed, "N"), "seed of data order and initial values")
    ("checkpoint-dir", text_flag(&checkpoint_dir, "DIR", false), "where checkpoints go (default: a new temp dir, removed when the run succeeds)")
    ("resume", text_flag(&resume_dir, "DIR", false), "continue the run whose checkpoints are in this directory "
                                       "(its process died), with the flags it was started with")
    ("checkpoint-every", number_flag(&cfg.checkpoint_every, "N"), "steps between checkpoints (0: none; the workers then keep every push in memory, to replay to a shard that restarts from scratch)")
    ("kill", text_flag(&kills_text, "SPEC", false), "kill actors at steps, shorthand for kill faults: shard:0@step=40,worker:1@90")
    ("faults", text_flag(&faults_text, "PLAN", false), "fault plan, e.g. kill:shard:0@40,drop:worker:1@55x3,"
                                        "reorder:worker:0>shard:1@push=90x2,eio:fsync@1500ms "
                                        "(actors/faults/fault_plan.hpp has the grammar)")
    ("random-faults", number_flag(&random_seed, "SEED", uint64_t{0}, UINT64_MAX, false),
     "add a random fault plan drawn from this seed")
    ("fault-rate", number_flag(&fault_rate, "R", 0.01, 100.0), "random faults per 100 steps")
    ("fault-mix", text_flag(&mix_text, "FAMILIES"),
     "random fault families: kills,supervisors,messages,storage,timed or all; and nodes (keel cluster)")
    ("request-timeout", number_flag<uint64_t>(&request_timeout_ms, "MS", 1, 3600000),
     "milliseconds before a worker retries a pull or push")
    ("report", text_flag(&report_path, "FILE", false), "write a JSON report here (keel plot draws it)")
    ("plot", text_flag(&plot_path, "FILE", false), "draw the run as SVG here (what keel plot draws)")
    ("data-dir", text_flag(&data_dir, "DIR", false), "dataset cache (default: ~/.cache/keel; fill it with scripts/fetch-mnist.sh)")
    ("train-limit", number_flag(&train_limit, "N"), "use only this many training examples (0: all)")
    ("test-limit", number_flag(&test_limit, "N"), "evaluate on only this many test examples (0: all)")
    ("timeout", number_flag<uint64_t>(&timeout_s, "SECONDS", 1, 1000000000), "give up after this many seconds")
    ("quiet", "print only the result")
    ("verbose", "print every event, checkpoints and retries included");
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
  auto fail_usage = [&](const char* flag, const caf::error& e) {
    return usage_error("train", flag, error_text(e));
  };
  auto rule = parse_consistency(consistency_text);
  if (!rule)
    return fail_usage("--consistency", rule.error());
  cfg.rule = *rule;
  auto opt = parse_optimizer(optimizer_name);
  if (!opt)
    return fail_usage("--optimizer", opt.error());
  cfg.optimizer.kind = *opt;
  if (!faults_text.empty()) {
    auto f = parse_fault_plan(faults_text);
    if (!f)
      return fail_usage("--faults", f.error());
    cfg.faults = *f;
  }
  if (!kills_text.empty()) {
    auto k = parse_kill_shorthand(kills_text);
    if (!k)
      return fail_usage("--kill", k.error());
    cfg.faults.insert(cfg.faults.end(), k->begin(), k->end());
  }
  model_options mo;
  mo.data_dir = data_dir.empty() ? default_data_dir() : std::filesystem::path(data_dir);
  mo.mnist_limits.train = train_limit;
  mo.mnist_limits.test = test_limit;
  auto model = make_model(model_name, mo);
  if (!model) {
    auto known = model_names();
    if (std::find(known.begin(), known.end(), model_name) == known.end())
      return fail_usage("--model", model.error());
    std::cerr << "keel train: " << describe(model.error()) << "\n";
    return 1;
  }
  cfg.training_model = *model;
  cfg.optimizer.lr = vm.count("lr") ? lr : default_lr(model_name);
  if (steps == 0) {
    auto spe = steps_per_epoch((*model)->num_train_examples(), cfg.workers, cfg.batch_size);
    steps = (epochs > 0 ? epochs : default_epochs(model_name)) * spe;
  }
  cfg.steps = steps;
  // A cluster's placement first: random plans may target its nodes.
  if (setup)
    if (auto err = setup(cfg, model_name, mo)) {
      std::cerr << program << ": " << describe(err) << "\n";
      return 1;
    }
  if (vm.count("random-faults")) {
    fault_mix mix;
    if (auto err = parse_fault_families(mix_text, mix))
      return fail_usage("--fault-mix", err);
    mix.faults = static_cast<uint32_t>(std::max(1.0, std::round(fault_rate * steps / 100.0)));
    mix.first_step = std::max<uint64_t>(1, steps / 20);
    mix.last_step = std::max<uint64_t>(mix.first_step, steps - 1);
    mix.shards = cfg.shards;
    mix.workers = cfg.workers;
    mix.nodes = cfg.placement ? cfg.placement->nodes() : 0;
    if (mix.node_faults && mix.nodes == 0)
      return usage_error("train", "--fault-mix", "the nodes family needs node processes (keel cluster)");
    auto plan = random_fault_plan(random_seed, mix);
    if (!vm.count("quiet"))
      std::cout << "keel train: random faults from seed " << random_seed << ": " << to_string(plan)
                << std::endl;
    cfg.faults.insert(cfg.faults.end(), plan.begin(), plan.end());
  }
  if (!resume_dir.empty()) {
    if (vm.count("checkpoint-dir") && checkpoint_dir != resume_dir) {
      return usage_error("train", "--resume", "'" + resume_dir + "' and --checkpoint-dir '" +
                                                checkpoint_dir + "' name different directories");
    }
    checkpoint_dir = resume_dir;
    cfg.resume = true;
  }
  // Checkpoints in a directory of our own making are removed after a run
  // that succeeded; after a failure they stay, for --resume.
  const bool temp_checkpoints = checkpoint_dir.empty();
  if (checkpoint_dir.empty()) {
    char tmpl[] = "/tmp/keel-train-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::cerr << "keel train: cannot create a temporary checkpoint directory\n";
      return 1;
    }
    checkpoint_dir = tmpl;
  }
  // Removes the directory made above when this command returns, unless a
  // failed run's checkpoints are in it.
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
  } made_dir{temp_checkpoints ? checkpoint_dir : std::string{}};
  cfg.checkpoint_dir = checkpoint_dir;
  cfg.request_timeout = std::chrono::milliseconds(request_timeout_ms);
  bool quiet = vm.count("quiet") > 0;
  cfg.progress_every = quiet ? 0 : std::max<uint64_t>(1, steps / 10);
  cfg.progress_accuracy = !quiet && (*model)->num_test_examples() > 0;
  if (quiet && metrics.enabled())
    cfg.progress_every = std::max<uint64_t>(1, steps / 100);  // metrics follow progress events
  if (auto err = metrics.start(std::cout); !err.empty()) {
    std::cerr << "keel train: " << err << "\n";
    return 2;
  }
  if (!quiet)
    std::cout << "keel train: " << model_name << ", " << cfg.shards << " shards, " << cfg.workers
              << " workers, " << to_string(cfg.rule) << ", " << to_string(cfg.optimizer.kind)
              << " lr " << cfg.optimizer.lr << ", " << steps << " steps of batch " << cfg.batch_size
              << ", checkpoints in " << checkpoint_dir << std::endl;
  if (cfg.checkpoint_every == 0) {
    // Every push stays in its worker's replay log: say how much that is.
    double mb = static_cast<double>(steps) * cfg.workers *
                static_cast<double>(cfg.training_model->layout().dense_size()) * 4 / 1e6;
    auto amount = mb >= 1 ? std::to_string(static_cast<uint64_t>(mb)) + " MB"
                          : std::to_string(static_cast<uint64_t>(mb * 1000)) + " kB";
    std::cerr << "keel train: warning: without checkpoints the workers keep every push in memory, about "
              << amount << " of dense gradients over this run (--checkpoint-every N bounds it)\n";
  }
  auto j = job::start(cfg);
  if (!j) {
    std::cerr << "keel train: " << describe(j.error()) << "\n";
    metrics.finish(nullptr);  // the file's last line says the job failed
    return 1;
  }
  if (!cfg.resume)
    if (auto err = save_train_args(checkpoint_dir, a))
      std::cerr << "keel train: warning: " << describe(err) << " (--resume will need the flags again)\n";
  bool verbose = vm.count("verbose") > 0;
  std::function<void(const job_event&)> print;
  if (!quiet)
    print = [verbose](const job_event& e) {
      bool routine = e.kind == event_kind::start || e.kind == event_kind::retry ||
                     e.kind == event_kind::shutdown || e.kind == event_kind::checkpoint ||
                     (e.kind == event_kind::down && !e.failed);
      if (e.kind == event_kind::progress)
        std::cout << "  " << e.detail << std::endl;
      else if (verbose || !routine)
        std::cout << "  [" << e.at_ms << " ms] " << to_string(e.kind) << " " << e.actor << ": " << e.detail
                  << std::endl;
    };
  (*j)->on_event([&metrics, print](const job_event& e) {
    metrics.observe(e);
    if (print)
      print(e);
  });
  auto r = (*j)->wait(std::chrono::seconds(timeout_s));
  auto metrics_error = metrics.finish(r ? &*r : nullptr);
  if (!metrics_error.empty())
    std::cerr << "keel train: " << metrics_error << "\n";
  j->reset();  // the job's actors are gone: nothing writes checkpoints any more
  if (!r) {
    std::cerr << "keel train: training failed: " << describe(r.error()) << "\n";
    if (temp_checkpoints) {
      made_dir.keep = true;
      std::cerr << "keel train: its checkpoints stay in " << checkpoint_dir << " (--resume "
                << checkpoint_dir << " continues the run)\n";
    }
    return 1;
  }
  uint64_t restarts = 0;
  for (auto& [name, n] : r->restarts)
    restarts += n;
  std::cout << "keel train: done in " << r->seconds << " s, " << r->samples_per_second
            << " samples/s, " << restarts << " restarts, " << r->rollbacks << " rollbacks";
  if (r->resumed_at_step > 0)
    std::cout << ", resumed at step " << r->resumed_at_step;
  std::cout << "\nkeel train: test ";
  if (r->quality.accuracy)
    std::cout << "accuracy " << *r->quality.accuracy << ", ";
  std::cout << "log loss " << r->quality.log_loss << " over " << r->quality.examples
            << " examples\nkeel train: pushes acked " << r->pushes_acked << ", applied "
            << r->pushes_applied << ", params_sha256 " << r->params_sha256 << "\n";
  if (r->faults_injected > 0 || !r->faults_not_injected.empty()) {
    std::cout << program << ": planned faults: " << r->faults_injected << " injected, "
              << r->faults_not_injected.size() << " not\n";
    for (auto& missed : r->faults_not_injected)
      std::cout << "  not injected: " << missed << "\n";
  }
  if (r->checkpoints > 0)
    std::cout << "keel train: " << r->checkpoints << " checkpoints committed; writing them took "
              << r->checkpoint_write_seconds << " s (" << r->checkpoint_write_cpu_seconds
              << " s of CPU), and the checkpoint window held workers back " << r->window_wait_seconds
              << " s in all\n";
  if (!quiet) {
    auto recovered = recoveries(r->events);
    if (!recovered.empty()) {
      std::cout << "keel train: recoveries:\n";
      for (auto& rec : recovered)
        std::cout << "  " << to_string(rec) << "\n";
    }
  }
  int status = metrics_error.empty() ? 0 : 1;
  if (auto probe = std::dynamic_pointer_cast<const probe_model>(cfg.training_model)) {
    // Every push adds exactly 1.0, so every parameter must equal the pushes
    // its shard acknowledged: none lost, none applied twice.
    auto err = probe->check({r->dense, r->sparse}, r->pushes_acked / cfg.shards);
    std::cout << "keel train: exactly once: "
              << (err ? "VIOLATED: " + describe(err) : std::string("every parameter equals the ") +
                                                         std::to_string(r->pushes_acked / cfg.shards) +
                                                         " pushes its shard acknowledged")
              << "\n";
    if (err)
      status = 1;
  }
  if (!report_path.empty() || !plot_path.empty()) {
    auto report = make_report(cfg, model_name, *r);
    auto err = report_path.empty() ? caf::error{} : write_report(report, report_path);
    if (!err && !plot_path.empty())
      err = write_plot(report, plot_path);
    if (err) {
      std::cerr << "keel train: " << error_text(err) << "\n";
      return 1;
    }
  }
  return status;
}

}  // namespace keel::cli
