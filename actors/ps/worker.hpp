#pragma once
// The worker actor runs the training loop of one data-parallel worker:
// for each global step g it computes its batch (a function of seed, epoch,
// worker and step), pulls the parameters it needs from every shard at clock
// g, computes the gradient, and pushes each shard its part with seq g+1.
// Every request has a finite timeout and is retried with exponential
// backoff; pushes are idempotent (seq), so retries are safe. Pushes stay in
// a replay log until a committed checkpoint covers them; when a shard comes
// back (a new incarnation in the directory) the worker resends its log to
// it. A gradient that is not finite is not pushed: the step is skipped
// (an empty push keeps BSP moving) and reported. A restarted worker asks the
// shards what they have of it and resumes at the first step one lacks. When
// a shard needs a push the log no longer holds, the worker asks the job for a
// rollback. It reports events and its end to `job`, and (when windowed)
// starts a step only inside the window the job grants. Under BSP, a worker
// of a dense model asks for the next step's parameters right behind its
// push (the pull is the same every step), so a shard answers it as soon as
// the step is applied: one round trip less per step for the step's slowest
// worker. The decisions live in worker_core (actors/core/worker_core.hpp); the
// actor performs them.
//
// While it trains (or once finished), a worker also scores held-out slices
// the job hands it, (score_atom, slice_task) -> slice_score
// (actors/core/slice_wire.hpp): it pulls the rows the slice needs from the
// shards at clock 0, as its steps pull, and scores them
// (worker_scoring.cpp); the step loop goes on meanwhile.
//
// A worker is described by one worker_config, the same for a worker started
// in this process (spawn_worker) and for one a node agent starts for another
// process (actors/cluster/node_protocol.hpp carries it as is): its core's
// rules, its place in the job, its timeouts, and the directory and job it
// talks to (actor handles cross processes). What cannot cross, the model
// object, the link faults and the data plane, is the worker_env beside it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/core/worker_core.hpp"
#include "actors/core/worker_schedule.hpp"
#include "actors/core/worker_report.hpp"
#include "models/model.hpp"

namespace keel {

class link_faults;
class data_plane;
class client_channel;

struct worker_config {
  // The step loop's rules: the worker's index, the job's tree generation
  // (epoch; rollbacks bump it), the shards' key ranges and directory names,
  // the global steps to run, the consistency rule, and flow control
  // (`windowed`: step s starts only once the job's window, window_atom,
  // exceeds s; the job keeps the window a bounded lead ahead of the last
  // checkpoint, which bounds the replay logs).
  worker_core_config core;
  uint32_t num_workers = 1;
  uint64_t seed = 1;
  uint32_t batch_size = 32;
  std::chrono::milliseconds request_timeout{2000};
  std::chrono::milliseconds retry_min{5};
  std::chrono::milliseconds retry_max{500};
  caf::actor directory;
  caf::actor job;  // receives job_event, done and rollback requests
  // Elastic workers (actors/core/worker_schedule.hpp): this worker's steps
  // are its span of the schedule, and its batches are dealt by its rank
  // among each step's workers. Without changes: num_workers throughout.
  worker_schedule schedule{1};
  // Under combine mean with elastic workers: the shards divide a step's sum
  // by num_workers, so this worker scales its gradient by num_workers over
  // the step's workers, and a step's update is the mean over those.
  bool mean_of_step_workers = false;
};

// What this process gives its worker beside the config.
struct worker_env {
  std::shared_ptr<const model> training_model;
  std::shared_ptr<link_faults> faults;  // message faults to inject (may be null)
  // Pushes and pulls to shards in other processes go over it where it has a
  // route (actors/data_plane/data_plane.hpp); null or no route: CAF's middleman.
  std::shared_ptr<data_plane> plane;
  // An application's own training loop (actors/core/client_channel.hpp):
  // when set, the step's keys and its gradient come from the application's
  // ps_client instead of the model's batch and gradient(); the rest of the
  // loop (pulls, pushes, the replay log, recovery) is the same. Null: the
  // model trains itself.
  std::shared_ptr<client_channel> channel;
};

// Fails (naming the worker) without a model, when the key ranges and the
// shard names disagree, or when the batch leaves no full batch per epoch.
caf::expected<caf::actor> spawn_worker(caf::actor_system& sys, worker_config cfg, worker_env env);

// The field order is the wire format.
template <class I>
typename I::result_type inspect(I& f, worker_config& x) {
  return f(caf::meta::type_name("keel.worker_config"), x.core, x.num_workers, x.seed, x.batch_size,
           x.request_timeout, x.retry_min, x.retry_max, x.directory, x.job, x.schedule,
           x.mean_of_step_workers);
}

}  // namespace keel
