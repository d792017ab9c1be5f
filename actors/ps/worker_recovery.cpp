// Recovery inside a worker: asking restarted shards what they hold and
// performing what the core decides from it (a resume step, a replay, or a
// rollback request). The decisions themselves live in actors/core/worker_core.cpp.
#include "actors/core/atoms.hpp"
#include "actors/ps/worker_state.hpp"

namespace keel::worker_detail {

// The core has halted: the worker cannot go on without state it no longer
// has, so it asks the job for a rollback.
void ask_for_rollback(worker_actor* self, const std::string& why) {
  auto& st = self->state;
  emit(self, event_kind::rollback, why);
  self->send(st.cfg.job, rollback_atom::value, st.cfg.core.epoch, st.cfg.core.worker, why);
}

namespace {

void perform_replay(worker_actor* self, uint32_t shard, uint64_t received) {
  auto& st = self->state;
  auto plan = st.core.replay(shard, received);
  if (plan.rollback)
    return ask_for_rollback(self, *plan.rollback);
  if (!plan.resend.empty()) {
    auto e = make_job_event(event_kind::replay, {},
                            "resending " + std::to_string(plan.resend.size()) + " pushes to " +
                                st.cfg.core.shard_names[shard]);
    e.count = plan.resend.size();
    e.peer = st.cfg.core.shard_names[shard];
    emit(self, std::move(e));
  }
  for (auto& m : plan.resend) send_push(self, shard, m, 0);
  if (plan.pull_again)
    send_pull(self, shard, 0);
}

}  // namespace


// Fencing: `shard`'s current incarnation named its epoch. Pushes and pulls
// name it from now on, and the incarnation before it, if still running
// somewhere (a partition that healed), learns it was replaced and stops.
void learned_epoch(worker_actor* self, uint32_t shard, uint64_t epoch) {
  auto& st = self->state;
  if (epoch == st.core.shard_epoch(shard))
    return;
  st.core.set_shard_epoch(shard, epoch);
  if (auto& old = st.replaced[shard]) {
    self->send(old, fence_atom::value, epoch);
    old = caf::actor{};
  }
}

// A shard has a new incarnation, restored from some checkpoint: ask it what
// it holds of this worker, then perform the core's replay plan.
void replay_to(worker_actor* self, uint32_t shard, uint32_t attempt) {
  auto& st = self->state;
  auto handle = st.shards[shard];
  self->request(handle, st.cfg.request_timeout, status_atom::value, st.cfg.core.worker)
      .then(
          [self, shard, handle](uint64_t received, uint64_t, uint64_t, uint64_t epoch) {
            if (handle != self->state.shards[shard])
              return;  // yet another incarnation took over
            learned_epoch(self, shard, epoch);
            perform_replay(self, shard, received);
          },
          [self, shard, handle, attempt](caf::error&) {
            auto& st = self->state;
            if (st.core.phase() == worker_phase::halted || handle != st.shards[shard])
              return;  // a newer incarnation gets its own replay
            refresh(self, shard);  // perhaps the update naming a newer one was lost
            self->delayed_send(self, backoff(st.cfg, attempt), replay_atom::value, shard,
                               attempt + 1);
          });
}

// Asks `shard` what it has received from this worker; once every shard has
// answered, the core knows where this incarnation starts (0 for a fresh job).
void ask_status(worker_actor* self, uint32_t shard, uint32_t attempt) {
  auto& st = self->state;
  auto gen = st.core.generation();
  auto handle = st.shards[shard];
  self->request(handle, st.cfg.request_timeout, status_atom::value, st.cfg.core.worker)
      .then(
          [self, shard, gen, handle](uint64_t received, uint64_t, uint64_t, uint64_t epoch) {
            auto& st = self->state;
            // A replaced incarnation's answer says nothing of the one that
            // replaced it, which has been asked in turn (shard_up).
            if (handle != st.shards[shard])
              return;
            learned_epoch(self, shard, epoch);
            switch (st.core.status_received(gen, shard, received)) {
              case worker_core::resume_outcome::pending:
                return;
              case worker_core::resume_outcome::rollback:
                return ask_for_rollback(self, st.core.rollback_reason().value_or(""));
              case worker_core::resume_outcome::start:
                break;
            }
            if (auto step = st.core.step(); step > 0) {
              auto e = make_job_event(event_kind::resume, {},
                                      "continuing at step " + std::to_string(step));
              e.step = step;
              emit(self, std::move(e));
            }
            start_step(self);
          },
          [self, shard, gen, attempt](caf::error& err) {
            auto& st = self->state;
            if (!st.core.status_open(gen))
              return;
            st.core.count_retry();
            emit(self, event_kind::retry,
                 "status of " + st.cfg.core.shard_names[shard] + ": " + self->system().render(err));
            refresh(self, shard);
            self->delayed_send(self, backoff(st.cfg, attempt), retry_atom::value, gen, shard,
                               attempt + 1, false);
          });
}

// Every shard is known (the core is resuming): ask each what it holds.
void resume(worker_actor* self) {
  for (uint32_t i = 0; i < self->state.shards.size(); ++i) ask_status(self, i, 0);
}

}  // namespace keel::worker_detail
