// Training throughput of keel (2 shards, 2 workers, BSP, checkpoints every
// 100 steps) beside the ceiling measured in the same run: a plain
// single-threaded SGD loop of the same model over the same number of
// examples (models/plain_trainer.hpp). Also prints each one's test accuracy.
// Usage: training_bench [model=mnist-mlp] [epochs=1]   (MNIST needs
// `bash scripts/fetch-mnist.sh` first)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "actors/keel.hpp"
#include "models/plain_trainer.hpp"

using namespace keel;

int main(int argc, char** argv) {
  std::string name = argc > 1 ? argv[1] : "mnist-mlp";
  uint64_t epochs = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  model_options mo;
  mo.data_dir = default_data_dir();
  auto m = make_model(name, mo);
  if (!m) {
    std::fprintf(stderr, "training_bench: %s\n", describe(m.error()).c_str());
    return 1;
  }
  const uint32_t batch = 32, workers = 2;
  const float lr = name == "mnist-softmax" ? 0.05f : 0.1f;

  plain_trainer_config pc;
  pc.lr = lr;
  pc.batch_size = batch;
  pc.epochs = epochs;
  auto plain = train_plain(**m, pc);
  if (!plain) {
    std::fprintf(stderr, "training_bench: %s\n", describe(plain.error()).c_str());
    return 1;
  }

  job_config cfg;
  cfg.training_model = *m;
  cfg.workers = workers;
  cfg.shards = 2;
  cfg.batch_size = batch;
  cfg.optimizer.lr = lr;
  cfg.steps = epochs * steps_per_epoch((*m)->num_train_examples(), workers, batch);
  cfg.checkpoint_every = 100;
  cfg.checkpoint_dir = std::filesystem::temp_directory_path() / "keel-training-bench";
  std::filesystem::remove_all(cfg.checkpoint_dir);
  auto j = job::start(cfg);
  if (!j) {
    std::fprintf(stderr, "training_bench: %s\n", describe(j.error()).c_str());
    return 1;
  }
  auto r = (*j)->wait(std::chrono::hours(1));
  if (!r) {
    std::fprintf(stderr, "training_bench: %s\n", describe(r.error()).c_str());
    return 1;
  }
  std::filesystem::remove_all(cfg.checkpoint_dir);
  auto acc = [](const evaluation& e) { return e.accuracy ? *e.accuracy : -1.0; };
  std::printf("%-14s %-40s %12s %10s\n", "model", "run", "samples/s", "test acc");
  std::printf("%-14s %-40s %12.0f %10.4f\n", name.c_str(), "plain single-thread SGD (ceiling)",
              plain->examples_per_second, acc(plain->final_test));
  std::printf("%-14s %-40s %12.0f %10.4f\n", name.c_str(), "keel 2 shards, 2 workers, BSP",
              r->samples_per_second, acc(r->quality));
  std::printf("ratio keel / plain: %.2f (wall time incl. start, checkpoints every 100 steps: %llu)\n",
              r->samples_per_second / plain->examples_per_second,
              static_cast<unsigned long long>(r->checkpoints));
  return 0;
}
