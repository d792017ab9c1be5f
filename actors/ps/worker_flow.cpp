// What the job tells a worker about where it may go (worker.hpp): the
// checkpoint window it may run up to, backpressure's events, and its
// workers changed while the job runs (actors/job/job_workers.cpp).
#include "actors/ps/worker_state.hpp"
#include "messages/errors.hpp"

namespace keel::worker_detail {

// Backpressure (worker_core.hpp): the step waits for a checkpoint; the job
// hears it once, when the pause begins and when it ends.
void emit_pause(worker_actor* self, bool begins) {
  auto& st = self->state;
  auto step = st.core.step();
  auto bytes = st.core.log().bytes();
  auto now = std::chrono::steady_clock::now();
  std::string detail;
  if (begins) {
    st.paused_since = now;
    detail = "replay log holds " + std::to_string(bytes) + " bytes, over its bound of " +
             std::to_string(st.cfg.core.log_bound) + ": paused before step " + std::to_string(step) +
             " until a checkpoint at step " + std::to_string(step) + " commits";
  } else {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - st.paused_since).count();
    detail = "resumed at step " + std::to_string(step) + " after " + std::to_string(ms) +
             " ms: a checkpoint committed, replay log now " + std::to_string(bytes) + " bytes";
    st.waiting_since = now;  // the window's wait, if any, starts now
  }
  auto e = make_job_event(begins ? event_kind::backpressure : event_kind::resumed, {}, detail);
  e.step = step;
  e.count = bytes;
  emit(self, std::move(e));
}

// The job widened the checkpoint window: a step waiting at it starts.
void on_window(worker_actor* self, uint64_t limit) {
  auto& st = self->state;
  if (!st.core.widen_window(limit))
    return;
  auto waited = std::chrono::steady_clock::now() - st.waiting_since;
  st.core.waited_at_window(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(waited).count()));
  start_step(self);
}

// From a step no worker has started: the batches' deal and this worker's
// last step follow the new schedule.
caf::result<caf::ok_atom> take_workers(worker_actor* self, const worker_schedule& workers) {
  auto& st = self->state;
  if (auto err = workers.check(st.cfg.num_workers))
    return err;
  st.cfg.schedule = workers;
  auto span = workers.span(st.cfg.core.worker);
  if (st.core.step() >= reserve_step && span.begin < reserve_step) {
    // Held in reserve until now, and done: the next incarnation starts at
    // the join, from the shards' seqs.
    self->quit(make_error(errc::shutting_down, "it joins at step " + std::to_string(span.begin)));
    return caf::ok_atom::value;
  }
  st.core.end_at(span.end);
  return caf::ok_atom::value;
}

}  // namespace keel::worker_detail
