// Issue 23's figure: the throughput of an application's own loop through
// keel::ps_client beside keel's own workers, in the same run, on the same
// model and configuration. The application's loop computes exactly what a
// keel worker computes (tests/actors/model_loop.hpp: the batch of (seed,
// epoch, step, worker), the model's gradient), so the difference is what
// the client's hand-offs cost: each step's pull answered to the
// application's thread and its gradient handed back, where a keel worker
// computes on its own actor thread. Both runs are BSP with the same seed,
// so their parameters must be bit-identical (checked: a mismatch fails the
// bench). The client loop runs twice: waiting for each answer before the
// next request, and pipelined (the next step's pull asked right behind the
// push, tests/actors/model_loop.hpp). Alternating runs, `repeats` of each;
// medians.
// Usage: client_bench [model=mnist-mlp] [epochs=1] [repeats=3]
//   (MNIST needs `bash scripts/fetch-mnist.sh` first)
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/keel.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_job.hpp"
#include "tests/actors/model_loop.hpp"

using namespace keel;

namespace {

const char* program = "client_bench";

job_config config(const std::shared_ptr<const model>& m, uint64_t epochs) {
  job_config cfg;
  cfg.training_model = m;
  cfg.training.workers = 2;
  cfg.training.shards = 2;
  cfg.training.batch_size = 32;
  cfg.training.optimizer.lr = 0.1f;
  cfg.training.steps = epochs * steps_per_epoch(m->num_train_examples(), 2, cfg.training.batch_size);
  cfg.checkpoints.every = 50;
  cfg.checkpoints.dir = std::filesystem::temp_directory_path() / ("keel-client-bench-" + std::to_string(::getpid()));
  std::filesystem::remove_all(cfg.checkpoints.dir);
  return cfg;
}

double samples_per_second(const job_config& cfg, const job_result& r) {
  return static_cast<double>(r.steps) * cfg.training.workers * cfg.training.batch_size / r.seconds;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name = argc > 1 ? argv[1] : "mnist-mlp";
  uint64_t epochs = argc > 2 ? std::stoull(argv[2]) : 1;
  int repeats = argc > 3 ? std::stoi(argv[3]) : 3;
  model_options o;
  o.data_dir = default_data_dir();
  auto m = make_model(name, o);
  if (!m)
    bench::fail(program, "model", m.error());
  std::vector<double> own, client, pipelined;
  for (int i = 0; i < repeats; ++i) {
    auto cfg = config(*m, epochs);
    auto ours = bench::run_job_to_end(cfg, program);
    std::filesystem::remove_all(cfg.checkpoints.dir);
    own.push_back(samples_per_second(cfg, ours));
    for (bool pipe : {false, true}) {
      std::vector<test::loop_outcome> loops;
      auto theirs = test::run_with_clients(cfg, loops, pipe);
      std::filesystem::remove_all(cfg.checkpoints.dir);
      if (!theirs)
        bench::fail(program, "client run", theirs.error());
      for (auto& l : loops)
        if (l.error)
          bench::fail(program, "client loop", l.error);
      if (theirs->params_sha256 != ours.params_sha256) {
        std::fprintf(stderr, "%s: the client run's parameters differ from keel's own workers' (BSP, same seed)\n",
                     program);
        return 1;
      }
      (pipe ? pipelined : client).push_back(samples_per_second(cfg, *theirs));
    }
    std::printf("%s: run %d: keel's workers %.0f samples/s; ps_client loops %.0f (%.2f), pipelined %.0f (%.2f); "
                "parameters bit-identical\n",
                program, i + 1, own.back(), client.back(), client.back() / own.back(), pipelined.back(),
                pipelined.back() / own.back());
  }
  auto a = bench::median(own), b = bench::median(client), c = bench::median(pipelined);
  std::printf("%s: %s, %llu epoch(s), 2 shards x 2 workers of batch 32, BSP, checkpoints every 50 steps, "
              "median of %d: ceiling keel's own workers %.0f samples/s; ps_client loops %.0f (ratio %.2f); "
              "pipelined (the next pull asked with the push) %.0f (ratio %.2f)\n",
              program, name.c_str(), static_cast<unsigned long long>(epochs), repeats, a, b, b / a, c, c / a);
  return 0;
}
