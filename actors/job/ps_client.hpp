#pragma once
// A ps_client runs one worker's training loop from the application's own
// code, as ps-lite's KVWorker or a TensorFlow train_step does: the
// application picks each step's keys, pulls the parameters, computes the
// gradient however it likes and pushes it. Each call returns a
// client_future (wait, poll, then). The worker behind the client keeps its
// guarantees: every push is applied exactly once, through shard crashes
// and restarts (its replay log, re-sent to a restarted shard, deduplicated
// by seq), under the job's consistency rule (a BSP step's pull waits for
// every worker's previous push), with checkpoints and rollbacks.
//
//   keel::job_config cfg;  cfg.application_loop = true;  ...
//   auto j = keel::job::start(cfg);
//   auto c = (*j)->client(0);
//   auto s = c->next_step().wait(t);
//   while (s && *s < c->steps()) {
//     auto p = c->pull(*s, keys_of_my_batch(*s)).wait(t);   // the step's parameters
//     if (p) {
//       auto g = c->gradient_for(**p);                       // zeros, shaped for the push
//       ... fill g from (*p)->view() and the batch ...
//       (void)c->push(*s, std::move(g)).wait(t);
//     }
//     s = c->next_step().wait(t);  // s + 1, or where a restart or rollback moved the worker
//   }
//
// Steps: the client runs the job's steps 0 .. steps()-1 in order. A
// restart of the worker, or a rollback of the job, moves the step the
// worker is at (back to what the shards or the checkpoint hold): a pull
// or push for another step then fails with errc::step_moved, and
// next_step() says where to go on. Under BSP, an application whose step s
// computes the same gradient from the same pulled parameters ends
// bit-identical whatever failed on the way. A push of the step the worker
// is at, interrupted by the worker's restart, is pushed again by the next
// incarnation (the gradient is kept until every shard acknowledged it).
//
// Pipelining: the pull of step s + 1 may be asked right behind the push
// of step s, before its answer; the worker then starts step s + 1 as soon
// as step s is acknowledged, without waiting for the application's thread
// (bench/training/client_bench measures both ways). One pull and one push
// may be outstanding at once.
//
// Errors are values: keys out of order, a gradient of the wrong shape or
// not finite, a pull of another step while one is out, a step past the
// last: invalid_argument, naming what was wrong. The job's end answers every open request with
// shutting_down. A ps_client is a cheap handle (copies share the
// worker); one thread at a time should drive one worker's loop, several
// workers may be driven from one thread or from several.

#include <cstdint>
#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "actors/core/client_future.hpp"
#include "actors/core/client_step.hpp"
#include "models/model.hpp"

namespace keel {

class client_channel;

class ps_client {
 public:
  uint32_t worker() const { return worker_; }
  // The job's steps (training_config::steps): the loop runs 0 .. steps()-1.
  uint64_t steps() const { return steps_; }
  const parameter_layout& layout() const { return model_->layout(); }

  // The step to run next: the first one the shards lack of this worker (at
  // the start, after a restart or a rollback), answered once the worker may
  // start it (the checkpoint window); steps() once every step is done.
  client_future<uint64_t> next_step();

  // Pulls step `step`'s parameters: every dense key, and `keys` (see
  // step_keys: sparse keys and table rows, each list ascending and
  // distinct; fewer table lists than the layout's tables mean none of the
  // rest). Under BSP the answer comes once every worker's step-1 push is
  // applied. Asked again with the same keys (a retry after a wait that ran
  // out), it gets the first pull's answer, whether that is still to come or
  // was given already.
  client_future<std::shared_ptr<const pulled_step>> pull(uint64_t step, step_keys keys = {});

  // A gradient shaped for the push of `p`'s step: every dense value 0, the
  // pulled sparse keys and table keys with zero values and rows.
  gradient_buffer gradient_for(const pulled_step& p) const;

  // Pushes the gradient of `step` (whose pull was answered), to be applied
  // once by the shards under the job's optimizer: answered with `step` when
  // every shard has acknowledged it. A gradient holding a NaN or an
  // infinity is refused (invalid_argument naming the tensor or table and
  // the element), unless check_finite(false): then the worker's guard skips
  // the step (nothing of it applied, a skipped_step event), as it does for
  // keel's own workers, and the push is answered.
  client_future<uint64_t> push(uint64_t step, gradient_buffer grad);

  // Whether push() refuses a gradient that is not finite (on by default;
  // the scan reads the gradient once). Set on this handle and its later
  // copies.
  void check_finite(bool on) { check_finite_ = on; }
  bool checks_finite() const { return check_finite_; }

  // Dense tensor `name` of the layout, as pulled or in a gradient. Fails
  // with not_found naming a tensor the layout lacks.
  caf::expected<span<const float>> tensor(const pulled_step& p, const std::string& name) const;
  caf::expected<span<float>> tensor(gradient_buffer& g, const std::string& name) const;

 private:
  friend class job;
  friend class cluster_client;  // actors/cluster/cluster_client.hpp
  ps_client(uint32_t worker, uint64_t steps, std::shared_ptr<const model> m,
            std::shared_ptr<client_channel> channel);
  caf::error check(const step_keys& keys) const;
  // The first value of `g` that is NaN or infinite, named, or no error.
  caf::error non_finite(uint64_t step, const gradient_buffer& g) const;

  uint32_t worker_ = 0;
  uint64_t steps_ = 0;
  std::shared_ptr<const model> model_;
  std::shared_ptr<client_channel> channel_;
  bool check_finite_ = true;
};

}  // namespace keel
