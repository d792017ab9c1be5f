#pragma once
// keel train's flags (keel cluster takes them too): every value they set,
// before train_command.cpp makes a job_config of them, and the
// options_description that declares them.
#include <cstdint>
#include <string>

#include "actors/job/placed_job.hpp"
#include "cli_flags.hpp"
#include "job_builder.hpp"

namespace keel::cli {

// Every value keel train's flags set, before they become a job_config.
struct train_flags {
  std::string command = "train";  // whose flags these are, for errors: "train" or "cluster"
  job_choices choices;
  placed_job_config cfg;  // the fields flags set directly: shards, workers, batch, seed, ...
  std::string kills_text, faults_text, report_path, plot_path, checkpoint_dir, data_dir, resume_dir;
  std::string worker_changes;
  std::string workers = "2";  // N or MIN:MAX
  std::string mix_text = "all";
  std::string scorers = "workers";
  std::string combine = "sum";
  uint64_t random_seed = 0;
  double fault_rate = 2.0;
  uint64_t epochs = 0, steps = 0, timeout_s = 3600;
  uint64_t request_timeout_ms = static_cast<uint64_t>(cfg.recovery.request_timeout.count());
  uint64_t stall_timeout_ms = 0;
  uint64_t replay_log_mb = 0;
  uint64_t stream_mb = 0;
  uint64_t storage_deadline_s = static_cast<uint64_t>(cfg.checkpoints.storage_deadline.count() / 1000);
  uint64_t train_limit = 0, test_limit = 0;
  float lr = 0;
};

// Declares every flag of keel train into `d`, each storing into `f`.
void add_train_flags(po::options_description& d, train_flags& f);

// The flag that sets a field of job_config, by its path as config_bounds.hpp
// names it ("training.workers": "--workers"), or "" when none does.
std::string flag_of_field(const std::string& field);

}  // namespace keel::cli
