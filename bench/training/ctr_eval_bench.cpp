// The end-of-run evaluation of a CTR model (default ctr-fm: 100k held-out
// rows, 10^7 IDs a field) scored by the coordinator against scored by the
// workers (job_config::evaluation), in this process with 2 workers and 2
// shards (BSP, AdaGrad, `steps` steps), alternating the order each round.
// Each keel figure is job_result::evaluation_seconds: from the final read
// to the merged evaluation (rows pulled from the shards slice by slice,
// scored, merged). The ceiling is the plain single-thread trainer's
// evaluation of its own parameters after the same number of steps (its
// rows in a hash map in this process, slices of 4096 as keel's): its
// wall time minus its training time. The two keel evaluations must agree
// bit for bit (printed). Medians over the rounds.
// Usage: ctr_eval_bench [model=ctr-fm|ctr-lr] [repeats=3] [steps=200]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "actors/keel.hpp"
#include "bench/bench_common.hpp"
#include "bench/bench_job.hpp"
#include "models/ctr_model.hpp"
#include "models/plain_trainer.hpp"

using namespace keel;

namespace {

using bench::median;

[[noreturn]] void fail(const std::string& what, const caf::error& e) { bench::fail("ctr_eval_bench", what, e); }

double plain_evaluation_seconds(const ctr_model& m, uint64_t steps) {
  plain_trainer_config pc;
  pc.batch_size = 256;
  pc.max_steps = steps;
  pc.lr = ctr_plain_lr(m.factors());
  pc.optimizer = plain_optimizer::adagrad;
  pc.eval_slice_examples = 4096;
  auto start = std::chrono::steady_clock::now();
  auto r = train_plain(m, pc);
  if (!r)
    fail("the plain trainer", r.error());
  auto wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return wall - r->train_seconds;
}

job_result run_keel(const std::shared_ptr<const ctr_model>& m, uint64_t steps, bool on_workers) {
  job_config cfg;
  cfg.training_model = m;
  cfg.training.workers = 2;
  cfg.training.shards = 2;
  cfg.training.batch_size = 128;
  cfg.training.optimizer.kind = optimizer_kind::adagrad;
  cfg.training.optimizer.lr = ctr_plain_lr(m->factors());
  cfg.training.steps = steps;
  cfg.checkpoints.every = 0;
  cfg.evaluation.on_workers = on_workers;
  cfg.checkpoints.dir =
    std::filesystem::temp_directory_path() / ("keel-ctr-eval-bench-" + std::to_string(::getpid()));
  std::filesystem::remove_all(cfg.checkpoints.dir);
  auto r = bench::run_job_to_end(cfg, "ctr_eval_bench");
  std::filesystem::remove_all(cfg.checkpoints.dir);
  return r;
}

bool same_quality(const evaluation& a, const evaluation& b) {
  return a.examples == b.examples && a.log_loss == b.log_loss && a.accuracy == b.accuracy &&
         a.metric("auc") == b.metric("auc");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "ctr-fm";
  const size_t repeats = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 3;
  const uint64_t steps = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 200;
  if ((which != "ctr-lr" && which != "ctr-fm") || repeats == 0 || steps == 0) {
    std::fprintf(stderr, "usage: ctr_eval_bench [ctr-fm|ctr-lr] [repeats>0] [steps>0]\n");
    return 2;
  }
  ctr_config c;
  auto made = ctr_model::make(c, which == "ctr-fm" ? c.fm_factors : 0);
  if (!made)
    fail("the model", made.error());
  std::shared_ptr<const ctr_model> m = *made;
  std::vector<double> plain, coordinator, workers;
  bool equal = true;
  uint64_t by_workers = 0;
  for (size_t i = 0; i < repeats; ++i) {
    plain.push_back(plain_evaluation_seconds(*m, steps));
    auto first = run_keel(m, steps, i % 2 == 1);
    auto second = run_keel(m, steps, i % 2 == 0);
    auto& on = i % 2 == 0 ? second : first;
    auto& off = i % 2 == 0 ? first : second;
    coordinator.push_back(off.evaluation_seconds);
    workers.push_back(on.evaluation_seconds);
    equal = equal && same_quality(on.quality, off.quality) && on.params_sha256 == off.params_sha256;
    by_workers += on.slices_scored.count("job") ? 0 : 1;
  }
  std::printf("== %s: end-of-run evaluation of %llu held-out rows in slices of 4096; keel: 2 shards, 2 workers, "
              "BSP, %llu steps, in this process (median of %zu)\n",
              m->name().c_str(), static_cast<unsigned long long>(m->num_test_examples()),
              static_cast<unsigned long long>(steps), repeats);
  std::printf("%-58s %9s %6s\n", "scored by", "seconds", "ratio");
  double ceiling = median(plain);
  std::printf("%-58s %9.3f %6.2f\n", "plain single-thread evaluate, rows in this process (ceiling)", ceiling, 1.0);
  std::printf("%-58s %9.3f %6.2f\n", "keel, the coordinator (pulls every slice's rows itself)", median(coordinator),
              ceiling / median(coordinator));
  std::printf("%-58s %9.3f %6.2f\n", "keel, the workers (each pulls its slices' rows)", median(workers),
              ceiling / median(workers));
  std::printf("(ratio: the ceiling's seconds over the row's; the two keel evaluations %s bit for bit; "
              "%llu of %zu worker runs without a slice left to the coordinator)\n",
              equal ? "agree" : "DIFFER", static_cast<unsigned long long>(by_workers), repeats);
  return equal ? 0 : 1;
}
