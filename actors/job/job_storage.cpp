// The controller and failing checkpoints (storage_state in
// job_controller.hpp): a failed or lost checkpoint moves the window past it;
// repeats of one failure reach the timeline summarised (the first, every
// 10^k-th, the total when a commit ends them); write failures that outlast
// checkpoint_config::storage_deadline since the last commit fail the job
// with one error naming the last failure and the last good checkpoint,
// which nothing touches afterwards (a resume continues from it).
#include "actors/job/job_controller.hpp"

#include <cstdio>

#include "messages/errors.hpp"

namespace keel {

namespace {

std::string seconds_text(std::chrono::steady_clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s",
                std::chrono::duration_cast<std::chrono::duration<double>>(d).count());
  return text;
}

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
  if (st.progress.checkpoints->given_up(e.step))
    widen_window(self);  // the previous checkpoint stays in force; go on
  auto& storage = st.storage;
  storage.last_failure = e.detail;
  bool stuck = e.failed || !storage.paused.empty();  // see storage_state
  if (stuck && !storage.failing_since)
    storage.failing_since = std::chrono::steady_clock::now();
  record_lines(self, e, storage.failures.failed(e.detail, elapsed_ms(st)));
  maybe_finish(self);  // the end of the run may wait for this checkpoint
}

void storage_committed(controller_actor* self, const checkpoint_committed& c) {
  auto& storage = self->state.storage;
  storage.failing_since.reset();
  storage.last_good = c.checkpoint;
  storage.last_good_step = c.step;
  if (!storage.failures.active())
    return;
  auto e = make_job_event(event_kind::checkpoint_failed, "checkpointer", "");
  e.step = c.step;
  e.checkpoint = c.checkpoint;
  record_lines(self, e,
               storage.failures.ended("checkpoint " + std::to_string(c.checkpoint) + " committed at step " +
                                        std::to_string(c.step),
                                      elapsed_ms(self->state)));
}

std::optional<std::chrono::steady_clock::time_point> storage_deadline(const controller_state& st) {
  if (!st.storage.failing_since)
    return std::nullopt;
  return *st.storage.failing_since + st.cfg.checkpoints.storage_deadline;
}

void watch_storage(controller_actor* self) {
  auto& st = self->state;
  auto due = storage_deadline(st);
  auto now = std::chrono::steady_clock::now();
  if (!due || now < *due || st.run.now != run_phase::running)
    return;
  auto& storage = st.storage;
  auto dir = st.cfg.checkpoints.dir.string();
  std::string last_good =
    storage.last_good == 0
      ? "no checkpoint of this run has committed, so there is nothing to resume from"
      : "the last good checkpoint is " + std::to_string(storage.last_good) + " (step " +
          std::to_string(storage.last_good_step) + ") in " + dir + ", left intact: keel train --resume " +
          dir + " continues from it";
  auto why = "checkpoints have failed for " + seconds_text(now - *storage.failing_since) +
             ", past the storage deadline of " + seconds_text(st.cfg.checkpoints.storage_deadline) + " (" +
             std::to_string(std::max<uint64_t>(1, storage.failures.count())) +
             " failures in a row); the last: " + storage.last_failure + "; " + last_good;
  record(self, make_job_event(event_kind::escalate, "checkpointer", why));
  end_job(self, make_error(errc::io_error, why));
}

}  // namespace keel
