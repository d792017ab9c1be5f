#pragma once
// A job whose shards and workers may run outside the job's process: the
// public job_config plus the placement that decides where (placement.hpp).
// keel_cluster's coordinator starts its jobs this way with a
// cluster_placement; job::start is start_job with none. Not installed: an
// application embeds keel through job::start alone.

#include <memory>
#include <vector>

#include <caf/expected.hpp>

#include "actors/job/job.hpp"

namespace keel {

class child_placement;
class client_channel;

struct placed_job_config : job_config {
  // Where shards and workers run; null: in the job's process.
  std::shared_ptr<child_placement> placement;
  // With job_config::application_loop: each worker's channel to the
  // application's loop (by worker index), the job's for its whole life.
  std::vector<std::shared_ptr<client_channel>> channels;
};

// job::start's contract, with the children placed by cfg.placement.
caf::expected<std::unique_ptr<job>> start_job(placed_job_config cfg);

}  // namespace keel
