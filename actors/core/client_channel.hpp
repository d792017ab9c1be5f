#pragma once
// A client_channel is where an application's training loop (ps_client,
// actors/job/ps_client.hpp) meets the worker actor that carries its steps
// (actors/ps/worker.cpp, worker_env::channel). The application asks (the
// step to run next, a pull of a step's keys, a push of its gradient), each
// answered through a client_future; the worker takes the requests at the
// points of its step loop where its own model would have been called (the
// batch's keys, the gradient) and answers them. Everything else, a worker's
// replay log, retries, re-routing to restarted shards, the checkpoint
// window, stays the worker's, so a client's pushes have a worker's
// guarantees.
//
// The channel outlives the worker's incarnations (the job holds it): a
// restarted worker attaches anew, resumes at the step the shards say, and
// settles what the application asked before the crash against it. A push
// of a step below it was applied by every shard: answered. A request for a
// step the worker is not at (a rollback moved it back, or the loop is out
// of step) fails with errc::step_moved naming the step the worker is at:
// the application asks next_step() and goes on from there. A push of the
// step the worker is at is sent again: the worker pulls the step's keys
// again (the ones of the pull that was answered) and pushes the gradient it
// holds. One pull and one push may be outstanding at a time; a pull asked
// again (the same step and keys: a retry after a wait that ran out) gets the
// first one's answer, still to come or given already while the worker holds
// the step, rather than a request of its own.
//
// Thread-safe: the application's side from any thread, the worker's from
// its actor. Answers (and their callbacks) are given outside the lock.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "actors/core/client_future.hpp"
#include "actors/core/client_step.hpp"
#include "models/model.hpp"

namespace keel {

using pulled_future = client_future<std::shared_ptr<const pulled_step>>;

class client_channel {
 public:
  // The channel of the worker called `worker` (e.g. "worker:0", for errors).
  explicit client_channel(std::string worker);

  // ---- The application's side ----------------------------------------------

  // The step the worker runs next: answered when it is ready to pull a step
  // no pull has been asked for (at once if it is waiting now), with the
  // job's step count once it has run every step.
  client_future<uint64_t> next_step();
  // Pulls `keys` for `step` (the caller checked them against the layout).
  client_future<std::shared_ptr<const pulled_step>> pull(uint64_t step, step_keys keys);
  // Pushes the gradient of `step`, whose pull was answered; answered with
  // `step` once every shard has acknowledged it. Checks `grad` against
  // that pull: every dense key, the pulled sparse keys and each table's
  // keys, rows of the pulled rows' dim.
  client_future<uint64_t> push(uint64_t step, gradient_buffer grad);
  // The job has ended: every open request and every later one fails with `why`.
  void close(caf::error why);
  // The worker has run every step of the job.
  bool finished();

  // ---- The worker's side ---------------------------------------------------

  // A new incarnation of the worker: `wake` (called on the application's
  // thread, outside the lock) tells it a request came. Returns its token;
  // calls with an older token change nothing.
  uint64_t attach(std::function<void()> wake);
  // The worker is ready to pull `step`: the keys to pull (the application's
  // pull of the step, or the answered pull's again for a pending push of
  // it), or nothing yet (it waits for `wake` and asks again). Settles what
  // the new position decides (see the opening).
  std::optional<step_keys> ready_at(uint64_t token, uint64_t step);
  // The step's parameters arrived: answers the pull. True when the
  // application has pushed the step's gradient, copied into `grad`;
  // otherwise the worker waits for `wake` and asks gradient().
  bool pulled(uint64_t token, uint64_t step, const parameter_view& params, gradient_buffer& grad);
  // True (and the gradient copied into `grad`) once the application has
  // pushed `step`'s gradient.
  bool gradient(uint64_t token, uint64_t step, gradient_buffer& grad);
  // Every shard has acknowledged the pushes of the steps below `steps_done`.
  void completed(uint64_t token, uint64_t steps_done);
  // The worker has run the job's `steps`: no further pull is answered.
  void finished(uint64_t token, uint64_t steps);

 private:
  struct pull_request {
    uint64_t step = 0;
    step_keys keys;
    client_future<std::shared_ptr<const pulled_step>> answer;
    bool taken = false;  // the worker is pulling it
  };
  struct push_request {
    uint64_t step = 0;
    gradient_buffer grad;
    client_future<uint64_t> answer;
  };
  using later = std::vector<std::function<void()>>;  // answers, given after the lock

  caf::error moved(const char* what, uint64_t asked, uint64_t at) const;
  caf::error past_the_end(uint64_t asked, uint64_t steps) const;  // a pull once every step is done
  caf::error other_keys(uint64_t step) const;  // a second pull of a step with other keys
  caf::error check_gradient(const gradient_buffer& g, const pulled_step& p) const;
  void settle_push(uint64_t at, later& out);

  const std::string worker_;
  std::mutex m_;
  uint64_t token_ = 0;
  std::function<void()> wake_;
  std::optional<uint64_t> ready_;     // the worker waits for the keys of this step
  std::optional<uint64_t> finished_;  // the worker has run this many steps, all of them
  std::optional<pull_request> pull_;
  std::optional<push_request> push_;
  // The last pull answered, with its keys: what a push is checked against,
  // and what a worker restarted before the push is acknowledged pulls again.
  std::shared_ptr<const pulled_step> delivered_;
  // The step of `delivered_` while the worker is at it (from its pull's
  // answer until the step completes or the worker moves): a retried pull of
  // it is answered with `delivered_`.
  std::optional<uint64_t> holding_;
  std::vector<client_future<uint64_t>> step_waiters_;
  caf::error closed_;
};

}  // namespace keel
