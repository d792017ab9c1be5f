// Recovery inside a worker: where a restarted worker resumes, what a
// restarted shard gets replayed, and when only a rollback will do.
#include <algorithm>

#include "actors/atoms.hpp"
#include "actors/worker_state.hpp"

namespace keel::worker_detail {

// The worker cannot go on without state it no longer has: ask for a rollback.
void halt_for_rollback(worker_actor* self, const std::string& why) {
  auto& st = self->state;
  st.now = phase::halted;
  ++st.generation;
  emit(self, event_kind::rollback, why);
  self->send(st.opt.job, rollback_atom::value, st.opt.epoch, st.opt.worker, why);
}

// A shard has a new incarnation, restored from some checkpoint: ask it what
// it holds of this worker, resend what it lacks from the replay log, then
// redo whatever the current step still needs from it. When the log no
// longer holds what the shard lacks (this worker restarted too, or the
// shard fell back to an older checkpoint), only a rollback recovers.
void replay_to(worker_actor* self, uint32_t shard, uint32_t attempt) {
  auto& st = self->state;
  auto handle = st.shards[shard];
  self->request(handle, st.opt.request_timeout, status_atom::value, st.opt.worker)
      .then(
          [self, shard, handle](uint64_t received, uint64_t, uint64_t) {
            auto& st = self->state;
            if (st.now == phase::halted || handle != st.shards[shard])
              return;  // halted, or yet another incarnation took over
            uint64_t last_sent = st.step + (st.now == phase::pushing ? 1 : 0);
            auto first = st.log.first_seq(shard);
            if (received < last_sent && (first == 0 || received + 1 < first)) {
              halt_for_rollback(self, st.opt.shard_names[shard] + " restored to seq " +
                                          std::to_string(received) + " of worker " +
                                          std::to_string(st.opt.worker) + ", whose log starts at " +
                                          std::to_string(first));
              return;
            }
            auto resend = st.log.after(shard, received);
            if (!resend.empty()) {
              st.report.replayed += resend.size();
              auto e = make_job_event(event_kind::replay, {},
                                      "resending " + std::to_string(resend.size()) +
                                        " pushes to " + st.opt.shard_names[shard]);
              e.count = resend.size();
              e.peer = st.opt.shard_names[shard];
              emit(self, std::move(e));
            }
            for (auto& m : resend) send_push(self, shard, m, 0);
            if (st.now == phase::pulling && !st.done[shard])
              send_pull(self, shard, 0);
          },
          [self, shard, handle, attempt](caf::error&) {
            auto& st = self->state;
            if (st.now == phase::halted || handle != st.shards[shard])
              return;  // a newer incarnation gets its own replay
            refresh(self, shard);  // perhaps the update naming a newer one was lost
            self->delayed_send(self, backoff(st.opt, attempt), replay_atom::value, shard,
                               attempt + 1);
          });
}

// Asks every shard what it has received from this worker; the first step
// some shard lacks is where this incarnation starts (0 for a fresh job).
void ask_status(worker_actor* self, uint32_t shard, uint32_t attempt) {
  auto& st = self->state;
  auto gen = st.generation;
  self->request(st.shards[shard], st.opt.request_timeout, status_atom::value, st.opt.worker)
      .then(
          [self, shard, gen](uint64_t received, uint64_t, uint64_t) {
            auto& st = self->state;
            if (gen != st.generation || st.now != phase::resuming || st.done[shard])
              return;
            st.resume_from[shard] = received;
            st.done[shard] = true;
            if (--st.pending > 0)
              return;
            st.step = *std::min_element(st.resume_from.begin(), st.resume_from.end());
            auto ahead = *std::max_element(st.resume_from.begin(), st.resume_from.end());
            st.max_acked = st.resume_from;
            // Under BSP, recomputing step `st.step` needs every shard's parameters
            // at that clock; shards that already hold later pushes of this worker
            // have moved on, so only a rollback reproduces the run exactly.
            if (st.opt.rule == consistency_kind::bsp && ahead > st.step) {
              halt_for_rollback(self, "restarted worker " + std::to_string(st.opt.worker) +
                                          " lost pushes " + std::to_string(st.step + 1) + ".." +
                                          std::to_string(ahead) + " that a restored shard needs");
              return;
            }
            if (st.step > 0) {
              auto e = make_job_event(event_kind::resume, {},
                                      "continuing at step " + std::to_string(st.step));
              e.step = st.step;
              emit(self, std::move(e));
            }
            start_step(self);
          },
          [self, shard, gen, attempt](caf::error& err) {
            auto& st = self->state;
            if (gen != st.generation || st.now != phase::resuming)
              return;
            ++st.report.retries;
            emit(self, event_kind::retry,
                 "status of " + st.opt.shard_names[shard] + ": " + self->system().render(err));
            refresh(self, shard);
            self->delayed_send(self, backoff(st.opt, attempt), retry_atom::value, gen, shard,
                               attempt + 1, false);
          });
}

void resume(worker_actor* self) {
  auto& st = self->state;
  st.now = phase::resuming;
  ++st.generation;
  std::fill(st.done.begin(), st.done.end(), false);
  st.pending = st.shards.size();
  for (uint32_t i = 0; i < st.shards.size(); ++i) ask_status(self, i, 0);
}

}  // namespace keel::worker_detail
