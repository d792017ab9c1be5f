// `keel train`: runs a training job of keel's parameter server in this
// process and prints its progress and result. With no arguments: MNIST MLP,
// 2 shards, 2 workers, BSP, checkpoints in a fresh temporary directory.
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "actors/keel.hpp"
#include "commands.hpp"
#include "train_args.hpp"
#include "messages/errors.hpp"
#include "models/probe_model.hpp"

namespace po = boost::program_options;

namespace keel::cli {

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void write_report(std::ostream& out, const job_config& cfg, const std::string& model_name,
                  const job_result& r) {
  out << "{\n  \"model\": " << json_string(model_name) << ",\n"
      << "  \"consistency\": " << json_string(to_string(cfg.rule)) << ",\n"
      << "  \"shards\": " << cfg.shards << ",\n  \"workers\": " << cfg.workers << ",\n"
      << "  \"seed\": " << cfg.seed << ",\n"
      << "  \"fault_plan\": " << json_string(r.fault_plan) << ",\n"
      << "  \"messages_hit\": {\"dropped\": " << r.messages_hit[0]
      << ", \"duplicated\": " << r.messages_hit[1] << ", \"delayed\": " << r.messages_hit[2]
      << ", \"reordered\": " << r.messages_hit[3] << "},\n"
      << "  \"test_accuracy\": ";
  if (r.quality.accuracy)
    out << *r.quality.accuracy;
  else
    out << "null";
  out << ",\n  \"test_log_loss\": " << r.quality.log_loss << ",\n"
      << "  \"steps\": " << r.steps << ",\n"
      << "  \"pushes_acked\": " << r.pushes_acked << ",\n"
      << "  \"pushes_applied\": " << r.pushes_applied << ",\n"
      << "  \"rollbacks\": " << r.rollbacks << ",\n"
      << "  \"checkpoints\": " << r.checkpoints << ",\n"
      << "  \"seconds\": " << r.seconds << ",\n"
      << "  \"samples_per_second\": " << r.samples_per_second << ",\n"
      << "  \"params_sha256\": " << json_string(r.params_sha256) << ",\n  \"restarts\": {";
  bool first = true;
  for (auto& [name, n] : r.restarts) {
    out << (first ? "" : ", ") << json_string(name) << ": " << n;
    first = false;
  }
  out << "},\n  \"events\": [";
  first = true;
  for (auto& e : r.events) {
    if (e.kind == event_kind::progress)
      continue;
    out << (first ? "\n" : ",\n") << "    {\"at_ms\": " << e.at_ms << ", \"kind\": " << json_string(to_string(e.kind))
        << ", \"actor\": " << json_string(e.actor) << ", \"detail\": " << json_string(e.detail)
        << ", \"count\": " << e.count << "}";
    first = false;
  }
  out << "\n  ],\n  \"recoveries\": [";
  first = true;
  for (auto& rec : recoveries(r.events)) {
    out << (first ? "\n" : ",\n") << "    {\"victim\": " << json_string(rec.victim)
        << ", \"kind\": " << json_string(rec.kind) << ", \"fault\": " << json_string(rec.fault)
        << ", \"fault_at_us\": " << rec.fault_at_us << ", \"served_after_us\": ";
    if (rec.served_after_us)
      out << *rec.served_after_us;
    else
      out << "null";
    out << ", \"restored_from\": " << json_string(rec.restored_from)
        << ", \"rolled_back\": " << (rec.rolled_back ? "true" : "false")
        << ", \"replayed\": " << rec.replayed << "}";
    first = false;
  }
  out << "\n  ]\n}\n";
}

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
  return 0.05f;
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
  uint64_t epochs = 1, steps = 0, timeout_s = 3600;
  uint64_t request_timeout_ms = static_cast<uint64_t>(cfg.request_timeout.count());
  uint64_t train_limit = 0, test_limit = 0;
  float lr = 0;
  po::options_description opts(
    "keel train: train a model on keel's parameter server in this process");
  opts.add_options()("help", "show this help")
    ("model", po::value(&model_name)->default_value(model_name), "mnist-mlp | mnist-softmax | sparse-lr | probe")
    ("shards", po::value(&cfg.shards)->default_value(cfg.shards), "parameter shards")
    ("workers", po::value(&cfg.workers)->default_value(cfg.workers), "workers")
    ("consistency", po::value(&consistency_text)->default_value(consistency_text), "bsp | ssp:S | asp")
    ("optimizer", po::value(&optimizer_name)->default_value(optimizer_name), "sgd | momentum | adagrad | adam")
    ("lr", po::value(&lr), "learning rate (default: the model's own)")
    ("batch", po::value(&cfg.batch_size)->default_value(cfg.batch_size), "examples per worker step")
    ("epochs", po::value(&epochs)->default_value(epochs), "passes over the training set")
    ("steps", po::value(&steps), "global steps per worker (overrides --epochs)")
    ("seed", po::value(&cfg.seed)->default_value(cfg.seed), "seed of data order and initial values")
    ("checkpoint-dir", po::value(&checkpoint_dir), "where checkpoints go (default: a new temp dir)")
    ("resume", po::value(&resume_dir), "continue the run whose checkpoints are in this directory "
                                       "(its process died), with the flags it was started with")
    ("checkpoint-every", po::value(&cfg.checkpoint_every)->default_value(cfg.checkpoint_every), "steps between checkpoints (0: none)")
    ("kill", po::value(&kills_text), "kill actors at steps, shorthand for kill faults: shard:0@step=40,worker:1@90")
    ("faults", po::value(&faults_text), "fault plan, e.g. kill:shard:0@40,drop:worker:1@55x3,"
                                        "reorder:worker:0>shard:1@push=90x2,eio:fsync@1500ms "
                                        "(actors/faults/fault_plan.hpp has the grammar)")
    ("random-faults", po::value(&random_seed), "add a random fault plan drawn from this seed")
    ("fault-rate", po::value(&fault_rate)->default_value(fault_rate), "random faults per 100 steps")
    ("fault-mix", po::value(&mix_text)->default_value(mix_text),
     "random fault families: kills,supervisors,messages,storage,timed or all")
    ("request-timeout", po::value(&request_timeout_ms)->default_value(request_timeout_ms),
     "milliseconds before a worker retries a pull or push")
    ("report", po::value(&report_path), "write a JSON report here")
    ("data-dir", po::value(&data_dir), "dataset cache (default: ~/.cache/keel; fill it with scripts/fetch-mnist.sh)")
    ("train-limit", po::value(&train_limit)->default_value(0), "use only this many training examples (0: all)")
    ("test-limit", po::value(&test_limit)->default_value(0), "evaluate on only this many test examples (0: all)")
    ("timeout", po::value(&timeout_s)->default_value(timeout_s), "give up after this many seconds")
    ("quiet", "print only the result")
    ("verbose", "print every event, checkpoints and retries included");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(a).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "keel train: " << e.what() << "\n\n" << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  auto fail_usage = [&](const caf::error& e) {
    std::cerr << "keel train: " << describe(e) << "\n";
    return 2;
  };
  auto rule = parse_consistency(consistency_text);
  if (!rule)
    return fail_usage(rule.error());
  cfg.rule = *rule;
  auto opt = parse_optimizer(optimizer_name);
  if (!opt)
    return fail_usage(opt.error());
  cfg.optimizer.kind = *opt;
  if (!faults_text.empty()) {
    auto f = parse_fault_plan(faults_text);
    if (!f)
      return fail_usage(f.error());
    cfg.faults = *f;
  }
  if (!kills_text.empty()) {
    auto k = parse_kill_shorthand(kills_text);
    if (!k)
      return fail_usage(k.error());
    cfg.faults.insert(cfg.faults.end(), k->begin(), k->end());
  }
  model_options mo;
  mo.data_dir = data_dir.empty() ? default_data_dir() : std::filesystem::path(data_dir);
  mo.mnist_limits.train = train_limit;
  mo.mnist_limits.test = test_limit;
  auto model = make_model(model_name, mo);
  if (!model) {
    std::cerr << "keel train: " << describe(model.error()) << "\n";
    return 1;
  }
  cfg.training_model = *model;
  cfg.optimizer.lr = vm.count("lr") ? lr : default_lr(model_name);
  if (steps == 0) {
    auto spe = steps_per_epoch((*model)->num_train_examples(), cfg.workers, cfg.batch_size);
    steps = epochs * spe;
  }
  cfg.steps = steps;
  if (vm.count("random-faults")) {
    fault_mix mix;
    if (auto err = parse_fault_families(mix_text, mix))
      return fail_usage(err);
    if (!(fault_rate > 0 && fault_rate <= 100)) {
      std::cerr << "keel train: --fault-rate must be in (0, 100] faults per 100 steps\n";
      return 2;
    }
    mix.faults = static_cast<uint32_t>(std::max(1.0, std::round(fault_rate * steps / 100.0)));
    mix.first_step = std::max<uint64_t>(1, steps / 20);
    mix.last_step = std::max<uint64_t>(mix.first_step, steps - 1);
    mix.shards = cfg.shards;
    mix.workers = cfg.workers;
    auto plan = random_fault_plan(random_seed, mix);
    if (!vm.count("quiet"))
      std::cout << "keel train: random faults from seed " << random_seed << ": " << to_string(plan)
                << std::endl;
    cfg.faults.insert(cfg.faults.end(), plan.begin(), plan.end());
  }
  if (!resume_dir.empty()) {
    if (vm.count("checkpoint-dir") && checkpoint_dir != resume_dir) {
      std::cerr << "keel train: --resume " << resume_dir << " and --checkpoint-dir " << checkpoint_dir
                << " name different directories\n";
      return 2;
    }
    checkpoint_dir = resume_dir;
    cfg.resume = true;
  }
  if (checkpoint_dir.empty()) {
    char tmpl[] = "/tmp/keel-train-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::cerr << "keel train: cannot create a temporary checkpoint directory\n";
      return 1;
    }
    checkpoint_dir = tmpl;
  }
  cfg.checkpoint_dir = checkpoint_dir;
  if (request_timeout_ms == 0 || request_timeout_ms > 3600000) {
    std::cerr << "keel train: --request-timeout must be 1..3600000 ms\n";
    return 2;
  }
  cfg.request_timeout = std::chrono::milliseconds(request_timeout_ms);
  bool quiet = vm.count("quiet") > 0;
  cfg.progress_every = quiet ? 0 : std::max<uint64_t>(1, steps / 10);
  cfg.progress_accuracy = !quiet && (*model)->num_test_examples() > 0;
  if (!quiet)
    std::cout << "keel train: " << model_name << ", " << cfg.shards << " shards, " << cfg.workers
              << " workers, " << to_string(cfg.rule) << ", " << to_string(cfg.optimizer.kind)
              << " lr " << cfg.optimizer.lr << ", " << steps << " steps of batch " << cfg.batch_size
              << ", checkpoints in " << checkpoint_dir << std::endl;
  if (setup)
    if (auto err = setup(cfg, model_name, mo)) {
      std::cerr << program << ": " << describe(err) << "\n";
      return 1;
    }
  auto j = job::start(cfg);
  if (!j) {
    std::cerr << "keel train: " << describe(j.error()) << "\n";
    return 1;
  }
  if (!cfg.resume)
    if (auto err = save_train_args(checkpoint_dir, a))
      std::cerr << "keel train: warning: " << describe(err) << " (--resume will need the flags again)\n";
  bool verbose = vm.count("verbose") > 0;
  if (!quiet)
    (*j)->on_event([verbose](const job_event& e) {
      bool routine = e.kind == event_kind::start || e.kind == event_kind::retry ||
                     e.kind == event_kind::shutdown || e.kind == event_kind::checkpoint ||
                     (e.kind == event_kind::down && !e.failed);
      if (e.kind == event_kind::progress)
        std::cout << "  " << e.detail << std::endl;
      else if (verbose || !routine)
        std::cout << "  [" << e.at_ms << " ms] " << to_string(e.kind) << " " << e.actor << ": " << e.detail
                  << std::endl;
    });
  auto r = (*j)->wait(std::chrono::seconds(timeout_s));
  if (!r) {
    std::cerr << "keel train: training failed: " << describe(r.error()) << "\n";
    return 1;
  }
  uint64_t restarts = 0;
  for (auto& [name, n] : r->restarts)
    restarts += n;
  std::cout << "keel train: done in " << r->seconds << " s, " << r->samples_per_second
            << " samples/s, " << restarts << " restarts, " << r->rollbacks << " rollbacks\n"
            << "keel train: test ";
  if (r->quality.accuracy)
    std::cout << "accuracy " << *r->quality.accuracy << ", ";
  std::cout << "log loss " << r->quality.log_loss << " over " << r->quality.examples
            << " examples\nkeel train: pushes acked " << r->pushes_acked << ", applied "
            << r->pushes_applied << ", params_sha256 " << r->params_sha256 << "\n";
  if (!quiet) {
    auto recovered = recoveries(r->events);
    if (!recovered.empty()) {
      std::cout << "keel train: recoveries:\n";
      for (auto& rec : recovered)
        std::cout << "  " << to_string(rec) << "\n";
    }
  }
  int status = 0;
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
  if (!report_path.empty()) {
    std::ofstream f(report_path);
    write_report(f, cfg, model_name, *r);
    if (!f) {
      std::cerr << "keel train: cannot write the report to " << report_path << "\n";
      return 1;
    }
  }
  return status;
}

}  // namespace keel::cli
