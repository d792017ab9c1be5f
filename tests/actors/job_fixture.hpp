#pragma once
// Runs small keel jobs for the failure-injection tests: a fresh checkpoint
// directory per run, removed afterwards, and a bounded wait.

#include <chrono>
#include <filesystem>
#include <random>
#include <string>

#include <doctest/doctest.h>

#include "actors/chaos/chaos.hpp"
#include "actors/keel.hpp"
#include "messages/errors.hpp"
#include "models/probe_model.hpp"
#include "models/sparse_lr.hpp"

namespace keel::test {

class temp_dir {
 public:
  temp_dir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("keel-job-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::shared_ptr<const model> probe() {
  auto m = probe_model::make({});
  REQUIRE(m);
  return *m;
}

// The probe with its embedding table: 4 rows a batch from a pool of 256 keys.
inline std::shared_ptr<const model> probe_with_table() {
  probe_config c;
  c.table_keys = 4;
  c.table_pool = 256;
  auto m = probe_model::make(c);
  REQUIRE(m);
  return *m;
}

inline std::shared_ptr<const model> small_sparse_lr() {
  sparse_lr_config c;
  c.keys = 1 << 14;
  c.train_rows = 4096;
  c.test_rows = 1024;
  c.max_features = 40;
  auto m = sparse_lr::make(c);
  REQUIRE(m);
  return *m;
}

inline job_config config_for(std::shared_ptr<const model> m, const temp_dir& dir, uint64_t steps) {
  job_config c;
  c.training_model = std::move(m);
  c.checkpoints.dir = dir.path();
  c.training.steps = steps;
  c.checkpoints.every = 10;
  c.training.optimizer.kind = optimizer_kind::sgd;
  c.training.optimizer.lr = 1.0f;
  c.recovery.request_timeout = std::chrono::milliseconds(1000);
  return c;
}

// Runs the job to its end within two minutes.
inline caf::expected<job_result> run(job_config c) {
  auto j = job::start(std::move(c));
  if (!j)
    return j.error();
  return (*j)->wait(std::chrono::minutes(2));
}

// The probe's exactly-once property: every parameter equals the pushes its
// shard acknowledged (every shard gets one push per worker and step).
inline void check_exactly_once(const job_config& c, const job_result& r) {
  CHECK(r.pushes_acked == uint64_t{c.training.workers} * c.training.shards * c.training.steps);
  CHECK(r.pushes_applied == r.pushes_acked);
  REQUIRE(std::dynamic_pointer_cast<const probe_model>(c.training_model));
  auto err = check_probe(c, r);  // dense, sparse and table rows
  CHECK_MESSAGE(!err, describe(err));
}

// Every fault the run planned took effect: a failure-injection test whose
// fault never fired (its step not reached, its target never back from an
// earlier kill) would pass without testing anything.
inline void check_faults_fired(const job_config& c, const job_result& r) {
  for (auto& missed : r.faults_not_injected)
    FAIL_CHECK("a planned fault did not take effect: " << missed);
  CHECK(r.faults_injected == c.faults.plan.size());
}

// A chaos setup: seeded runs of `steps` steps, a checkpoint every
// `checkpoint_every`, `faults` random faults per run from step 3 to steps - 5.
inline chaos_options chaos_setup(std::shared_ptr<const model> m, const temp_dir& dir,
                                 consistency rule, uint64_t steps, uint64_t checkpoint_every,
                                 uint32_t faults, std::chrono::milliseconds request_timeout) {
  chaos_options o;
  auto& c = o.base;
  c.training_model = std::move(m);
  c.training.rule = rule;
  c.training.steps = steps;
  c.training.batch_size = 16;
  c.training.optimizer.lr = 1.0f;
  c.checkpoints.every = checkpoint_every;
  c.recovery.request_timeout = request_timeout;
  c.checkpoints.timeout = 10 * request_timeout;
  c.checkpoints.dir = dir.path();
  o.mix.faults = faults;
  o.mix.first_step = 3;
  o.mix.last_step = steps - 5;
  o.run_timeout = std::chrono::seconds(120);
  return o;
}

inline uint64_t count(const job_result& r, event_kind kind, const std::string& actor = {}) {
  uint64_t n = 0;
  for (auto& e : r.events)
    if (e.kind == kind && (actor.empty() || e.actor == actor))
      ++n;
  return n;
}

}  // namespace keel::test
