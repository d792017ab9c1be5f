// An application's own model trained on keel's parameter server, embedded
// in this process: fit y = 3x - 1 (plus noise) with two parameters, while
// keel kills a shard and a worker halfway through. Prints the fit and what
// keel recovered from.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <keel/keel.hpp>

#include "line_fit_model.hpp"

using line_fit_example::line_fit;

int main() {
  keel::job_config cfg;
  cfg.training_model = std::make_shared<line_fit>();
  cfg.training.shards = 2;  // w on one shard, b on the other
  cfg.training.workers = 2;
  cfg.training.steps = 200;
  cfg.training.batch_size = 16;
  cfg.training.optimizer.lr = 0.05f;
  cfg.checkpoints.every = 20;
  cfg.checkpoints.dir = std::filesystem::temp_directory_path() / "keel-line-fit";
  std::filesystem::remove_all(cfg.checkpoints.dir);
  cfg.faults.plan = {keel::kill_at("shard:1", 100), keel::kill_at("worker:0", 100)};
  auto job = keel::job::start(cfg);
  if (!job) {
    std::fprintf(stderr, "line_fit: %s\n", keel::describe(job.error()).c_str());
    return 1;
  }
  (*job)->on_event([](const keel::job_event& e) {
    if (e.kind == keel::event_kind::fault || e.kind == keel::event_kind::restart ||
        e.kind == keel::event_kind::rollback)
      std::printf("  %s\n", keel::to_string(e).c_str());
  });
  auto r = (*job)->wait(std::chrono::minutes(2));
  if (!r) {
    std::fprintf(stderr, "line_fit: training failed: %s\n", keel::describe(r.error()).c_str());
    return 1;
  }
  std::printf("line_fit: y = %.3f x %+.3f (truth: 3x - 1), test MSE %.4f, %llu pushes acked\n",
              r->dense[0], r->dense[1], r->quality.metric("mse").value_or(NAN),
              static_cast<unsigned long long>(r->pushes_acked));
  std::printf("line_fit: planned faults: %llu injected, %zu not\n",
              static_cast<unsigned long long>(r->faults_injected), r->faults_not_injected.size());
  bool ok = keel::meets(r->quality, cfg.training_model->target());
  std::printf("line_fit: %s\n", ok ? "fit reached its target" : "fit missed its target");
  return ok ? 0 : 1;
}
