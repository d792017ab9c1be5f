// An application that keeps its own training loop and uses keel for push
// and pull (keel::ps_client): the line fit of line_fit_model.hpp, whose
// gradient this program computes itself, from batches it picks itself, on
// two threads (one per worker) while it kills a shard halfway through.
// keel's shards hold w and b, apply every push exactly once, and restart
// the killed shard from its checkpoint plus the pushes replayed since.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <keel/keel.hpp>

#include "line_fit_model.hpp"

using line_fit_example::example;

// The mean squared error's gradient over examples [first, first + n), at
// the pulled w and b: the application's own code.
void fill_gradient(const keel::ps_client& c, const keel::pulled_step& p, uint64_t first, uint64_t n,
                   keel::gradient_buffer& g) {
  float w = (*c.tensor(p, "w"))[0], b = (*c.tensor(p, "b"))[0], gw = 0, gb = 0;
  for (uint64_t i = first; i < first + n; ++i) {
    float x, y;
    example(i % 8192, x, y);
    float err = w * x + b - y;
    gw += 2 * err * x / n;
    gb += 2 * err / n;
  }
  (*c.tensor(g, "w"))[0] = gw;
  (*c.tensor(g, "b"))[0] = gb;
}

int main() {
  keel::job_config cfg;
  cfg.training_model = std::make_shared<line_fit_example::line_fit>();  // layout, initial values, evaluation
  cfg.application_loop = true;  // the gradients are this program's
  cfg.training.steps = 200;
  cfg.training.optimizer.lr = 0.05f;
  cfg.checkpoints.every = 20;
  cfg.checkpoints.dir = std::filesystem::temp_directory_path() / "keel-own-loop";
  std::filesystem::remove_all(cfg.checkpoints.dir);
  auto job = keel::job::start(cfg);
  if (!job)
    return std::fprintf(stderr, "own_loop: %s\n", keel::describe(job.error()).c_str()), 1;
  const auto t = std::chrono::seconds(30);
  std::vector<std::thread> loops;
  for (uint32_t w = 0; w < cfg.training.workers; ++w)
    loops.emplace_back([&job, t, c = *(*job)->client(w)]() mutable {
      for (auto s = c.next_step().wait(t); s && *s < c.steps(); s = c.next_step().wait(t)) {
        auto p = c.pull(*s).wait(t);  // w and b as of step *s
        if (!p)
          continue;  // step_moved: a restart moved the worker; next_step says where
        auto g = c.gradient_for(**p);
        fill_gradient(c, **p, (*s * 2 + c.worker()) * 16, 16, g);
        auto done = c.push(*s, std::move(g)).wait(t);  // acknowledged by every shard
        if (done && c.worker() == 0 && *done == 100 && !(*job)->kill("shard:1"))
          std::printf("own_loop: killed shard:1 after step 100\n");
      }
    });
  for (auto& l : loops) l.join();
  auto r = (*job)->wait(std::chrono::minutes(1));
  if (!r)
    return std::fprintf(stderr, "own_loop: %s\n", keel::describe(r.error()).c_str()), 1;
  std::printf("own_loop: y = %.3f x %+.3f (truth: 3x - 1), test MSE %.4f, shard:1 restarts %llu\n",
              r->dense[0], r->dense[1], r->quality.metric("mse").value_or(NAN),
              static_cast<unsigned long long>(r->restarts["shard:1"]));
  std::printf("own_loop: pushes acked %llu, applied %llu\n", static_cast<unsigned long long>(r->pushes_acked),
              static_cast<unsigned long long>(r->pushes_applied));
  bool ok = keel::meets(r->quality, cfg.training_model->target()) && r->pushes_acked == r->pushes_applied;
  std::printf("own_loop: %s\n", ok ? "fit reached its target" : "fit missed its target");
  return ok ? 0 : 1;
}
