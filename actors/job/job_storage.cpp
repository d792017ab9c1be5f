// The controller and its checkpoints as they end (checkpoint_window.hpp
// decides; this carries it out): a failed or lost checkpoint moves the
// window past it, a commit moves it on; the workers hear of the window, the
// timeline gets the failure series' lines; the storage deadline, once
// passed, fails the job.
#include "actors/job/job_controller.hpp"

#include "messages/errors.hpp"

namespace keel {

namespace {

// Records the series' lines for `e` (the first failure as it is).
void record_lines(controller_actor* self, const job_event& e,
                  const std::vector<failure_series::line>& lines) {
  for (auto& l : lines) {
    auto shown = e;
    shown.detail = l.text;
    shown.count = l.count;
    record(self, std::move(shown));
  }
}

}  // namespace

void on_checkpoint_failed(controller_actor* self, job_event e) {
  auto& st = self->state;
  auto out = st.progress.checkpoints->failed(e.step, e.detail, e.failed, elapsed_ms(st),
                                             std::chrono::steady_clock::now());
  if (out.window_moved)
    widen_window(self);  // the previous checkpoint stays in force; go on
  record_lines(self, e, out.lines);
  maybe_finish(self);  // the end of the run may wait for this checkpoint
}

bool window_committed(controller_actor* self, const checkpoint_committed& c) {
  auto out = self->state.progress.checkpoints->committed(c.checkpoint, c.step, c.shards, elapsed_ms(self->state));
  auto e = make_job_event(event_kind::checkpoint_failed, "checkpointer", "");
  e.step = c.step;
  e.checkpoint = c.checkpoint;
  record_lines(self, e, out.lines);
  return out.window_moved;
}

void watch_storage(controller_actor* self) {
  auto& st = self->state;
  if (!st.run.core.running())
    return;
  auto why = st.progress.checkpoints->storage_expired(std::chrono::steady_clock::now(), st.cfg.checkpoints.dir.string());
  if (!why)
    return;
  record(self, make_job_event(event_kind::escalate, "checkpointer", *why));
  end_job(self, make_error(errc::io_error, *why));
}

}  // namespace keel
