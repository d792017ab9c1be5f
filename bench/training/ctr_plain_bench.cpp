// The plain single-process trainer on the click-log models (ctr-lr, ctr-fm):
// the accuracy and speed reference keel's distributed CTR runs are measured
// against. For each model it prints the held-out log loss and AUC (with the
// histogram's tie bound) beside the planted model's (the Bayes log loss and
// the best AUC) and the base rate's entropy, and the training examples/s
// beside figures measured in the same run on the same rows:
//  - generation: examples/s of generating the rows alone (ctr_data), which
//    every trainer of this data pays: the ceiling, and the ratio's base;
//  - hash update: examples/s of a loop that generates the rows and adds a
//    constant to each feature's row, stored as the plain trainer stores
//    rows, one example at a time (no batch, so no deduplication of a batch's
//    keys: not a ceiling of the trainer, which touches a hot row once a
//    batch, but the cost of per-example row traffic).
// Usage: ctr_plain_bench [model=all|ctr-lr|ctr-fm] [train_examples=1000000]
//                        [epochs=1] [vocabulary=10000000] [batch=256] [lr=1.0]
//                        [optimizer=adagrad|sgd]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "messages/errors.hpp"
#include "models/ctr_model.hpp"
#include "models/plain_trainer.hpp"

using namespace keel;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Examples/s of generating `n` training rows.
double generation_rate(const ctr_data& data, uint64_t n) {
  ctr_example ex;
  uint64_t sink = 0;
  const auto start = clock_type::now();
  for (uint64_t r = 0; r < n; ++r) {
    data.generate(r, ex);
    sink += ex.label;
  }
  const double s = seconds_since(start);
  std::fprintf(stderr, "(%llu clicks)\n", static_cast<unsigned long long>(sink));
  return static_cast<double>(n) / s;
}

// Examples/s of generating rows and adding to each feature's row of `dim`
// floats, the rows stored as the plain trainer stores them (an
// unordered_map per field from key to row number in one arena), a row
// created on first touch.
double hash_update_rate(const ctr_data& data, uint64_t n, uint32_t dim) {
  std::vector<plain_table> tables(ctr_categorical_fields);
  ctr_example ex;
  const auto start = clock_type::now();
  for (uint64_t r = 0; r < n; ++r) {
    data.generate(r, ex);
    for (uint32_t f = 0; f < ctr_categorical_fields; ++f) {
      auto& t = tables[f];
      auto [it, fresh] = t.index.emplace(ex.keys[f], t.rows.size() / dim);
      if (fresh)
        t.rows.resize(t.rows.size() + dim, 0.0f);
      float* row = t.rows.data() + it->second * dim;
      for (uint32_t j = 0; j < dim; ++j) row[j] += 0.001f;
    }
  }
  return static_cast<double>(n) / seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  ctr_config c;
  if (argc > 2)
    c.train_examples = std::strtoull(argv[2], nullptr, 10);
  const uint64_t epochs = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;
  if (argc > 4)
    c.vocabulary = std::strtoull(argv[4], nullptr, 10);
  const uint32_t batch = argc > 5 ? static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 10)) : 256;
  const float lr = argc > 6 ? std::strtof(argv[6], nullptr) : 0.0f;
  const bool sgd = argc > 7 && std::string(argv[7]) == "sgd";
  if (auto err = validate(c)) {
    std::fprintf(stderr, "ctr_plain_bench: %s\n", describe(err).c_str());
    return 2;
  }
  if (which != "all" && which != "ctr-lr" && which != "ctr-fm") {
    std::fprintf(stderr, "ctr_plain_bench: model must be all, ctr-lr or ctr-fm, not %s\n",
                 which.c_str());
    return 2;
  }
  std::printf("== plain single-process trainer on the click log (%llu training rows, %llu epochs, "
              "vocabulary %llu a field, batch %u, %s)\n",
              static_cast<unsigned long long>(c.train_examples),
              static_cast<unsigned long long>(epochs),
              static_cast<unsigned long long>(c.vocabulary), batch, sgd ? "SGD" : "AdaGrad");
  std::printf("%-8s %9s %9s %9s %9s %9s %8s %12s %12s %12s %6s\n", "model", "logloss", "bayes",
              "entropy", "auc", "best auc", "tie", "examples/s", "generate/s", "hash upd/s",
              "ratio");
  for (uint32_t factors : {0u, c.fm_factors}) {
    auto made = ctr_model::make(c, factors);
    if (!made) {
      std::fprintf(stderr, "ctr_plain_bench: %s\n", describe(made.error()).c_str());
      return 1;
    }
    const auto& m = **made;
    if (which != "all" && which != m.name())
      continue;
    plain_trainer_config pc;
    pc.batch_size = batch;
    pc.epochs = epochs;
    pc.lr = lr > 0 ? lr : ctr_plain_lr(factors);
    pc.optimizer = sgd ? plain_optimizer::sgd : plain_optimizer::adagrad;
    auto r = train_plain(m, pc);
    if (!r) {
      std::fprintf(stderr, "ctr_plain_bench: %s\n", describe(r.error()).c_str());
      return 1;
    }
    const uint64_t sample = std::min<uint64_t>(c.train_examples, 200'000);
    const double gen = generation_rate(m.data(), sample);
    const double upd = hash_update_rate(m.data(), sample, m.row_dim());
    const auto& e = r->final_test;
    std::printf("%-8s %9.4f %9.4f %9.4f %9.4f %9.4f %8.1e %12.0f %12.0f %12.0f %6.2f\n",
                m.name().c_str(), *e.log_loss, *m.planted().log_loss, m.base_entropy(),
                *e.metric("auc"), *m.planted().metric("auc"), *e.metric("auc_tie_bound"),
                r->examples_per_second, gen, upd, r->examples_per_second / gen);
  }
  std::printf("(ratio: the trainer's examples/s over generation's, the ceiling of any trainer\n"
              " of this data in one thread)\n");
  return 0;
}
