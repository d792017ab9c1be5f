#include "actors/ps/checkpointer.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include <caf/all.hpp>

#include "actors/core/atoms.hpp"
#include "actors/core/crash.hpp"
#include "actors/core/job_event.hpp"
#include "messages/decode.hpp"
#include "storage/snapshot_store.hpp"

namespace keel {

namespace {

struct checkpointer_state {
  checkpointer_config cfg;
  std::unique_ptr<snapshot_store> store;
  uint64_t last_committed = 0;
  uint64_t last_lost = 0;  // the newest checkpoint given up as incomplete
  struct arrived {
    shard_snapshot_msg msg;
    uint64_t step = 0;
  };
  using shard_set = std::map<uint32_t, arrived>;
  // checkpoint id -> (shard -> snapshot)
  std::map<uint64_t, shard_set> pending;
  // The newest checkpoint whose write failed, kept to be written again.
  std::optional<std::pair<uint64_t, shard_set>> retained;
  uint32_t failures = 0;  // writes failed in a row since the last commit
};

using checkpointer_actor = caf::stateful_actor<checkpointer_state>;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

void report(checkpointer_actor* self, event_kind kind, std::string detail, uint64_t step,
            uint64_t checkpoint = 0) {
  auto& st = self->state;
  auto e = make_job_event(kind, "checkpointer", std::move(detail));
  e.step = step;
  e.checkpoint = checkpoint;
  if (st.cfg.job)
    self->send(st.cfg.job, std::move(e));
}

// CPU time of the calling thread, in microseconds.
int64_t thread_cpu_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// A write failed: the checkpoint is written again after the backoff,
// unless a newer one has arrived complete by then.
void retain(checkpointer_actor* self, uint64_t id, const checkpointer_state::shard_set& shards) {
  auto& st = self->state;
  st.retained.emplace(id, shards);
  auto wait = st.cfg.retry_min * (1u << std::min<uint32_t>(st.failures, 16));
  ++st.failures;
  self->delayed_send(self, std::min(wait, st.cfg.retry_max), retry_atom::value, id);
}

void write_checkpoint(checkpointer_actor* self, uint64_t id, const checkpointer_state::shard_set& shards) {
  auto& st = self->state;
  st.retained.reset();
  std::vector<shard_snapshot_msg> snaps;
  uint64_t step = 0;
  checkpoint_committed note;
  note.checkpoint = id;
  for (auto& [shard, a] : shards) {
    step = std::max(step, a.step);
    note.shards.push_back({shard, a.step, a.msg.frame()});
    snaps.push_back(a.msg);
  }
  note.step = step;
  auto t0 = std::chrono::steady_clock::now();
  auto cpu0 = thread_cpu_us();
  auto r = st.store->write_checkpoint(id, step, unix_ms(), snaps);
  note.write_cpu_us = thread_cpu_us() - cpu0;
  note.write_us =
    std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  if (!r) {
    st.store->abandon(id);
    auto e = make_job_event(event_kind::checkpoint_failed, "checkpointer",
                            "checkpoint " + std::to_string(id) + " at step " + std::to_string(step) +
                              ": " + describe(r.error()) + "; checkpoint " +
                              std::to_string(st.last_committed) + " stays in force");
    e.step = step;
    e.checkpoint = id;
    e.failed = true;  // storage, not a lost snapshot
    if (st.cfg.job)
      self->send(st.cfg.job, std::move(e));
    retain(self, id, shards);
    return;
  }
  st.last_committed = id;
  st.failures = 0;
  // The note first: whoever sees the event can rely on the job knowing it.
  self->send(st.cfg.job, std::move(note));
  report(self, event_kind::checkpoint,
         "checkpoint " + std::to_string(id) + " committed at step " + std::to_string(step), step, id);
}

// The backoff after a failed write of `id` has passed.
void write_again(checkpointer_actor* self, uint64_t id) {
  auto& st = self->state;
  if (!st.retained || st.retained->first != id || id <= st.last_committed)
    return;  // written since, or replaced by a newer checkpoint
  auto shards = std::move(st.retained->second);
  write_checkpoint(self, id, shards);
}

}  // namespace

caf::expected<caf::actor> spawn_checkpointer(caf::actor_system& sys, checkpointer_config cfg,
                                             checkpointer_env env) {
  store_options so;
  so.keep_last = cfg.keep_last;
  so.run = {cfg.run_id, cfg.config_hash, cfg.config};
  if (env.io)
    so.io = env.io;
  auto store = snapshot_store::open(cfg.dir, so);
  if (!store)
    return store.error();
  auto committed = (*store)->committed();
  if (!committed)
    return committed.error();
  uint64_t last = committed->empty() ? 0 : committed->back();
  auto shared_store = std::make_shared<std::unique_ptr<snapshot_store>>(std::move(*store));
  auto behavior = [cfg, shared_store, last](checkpointer_actor* self) -> caf::behavior {
    auto& st = self->state;
    st.cfg = cfg;
    st.store = std::move(*shared_store);
    st.last_committed = last;
    self->set_exception_handler(exception_as_error);
    return {
      [](crash_atom) { throw std::runtime_error("injected exception"); },
      [self](retry_atom, uint64_t id) { write_again(self, id); },
      [self](expire_atom, uint64_t id) {
        auto& st = self->state;
        auto it = st.pending.find(id);
        if (it == st.pending.end())
          return;  // written, or superseded by a newer one
        uint64_t step = 0;
        std::string have;
        for (auto& [shard, a] : it->second) {
          step = std::max(step, a.step);
          have += (have.empty() ? "" : ", ") + std::to_string(shard);
        }
        st.pending.erase(st.pending.begin(), std::next(it));
        st.last_lost = id;
        report(self, event_kind::checkpoint_failed,
               "checkpoint " + std::to_string(id) + " at step " + std::to_string(step) +
                 ": lost, only shard(s) " + have + " of " + std::to_string(st.cfg.num_shards) +
                 " sent a snapshot within " + std::to_string(st.cfg.incomplete_timeout.count()) +
                 " ms; checkpoint " + std::to_string(st.last_committed) + " stays in force",
               step, id);
      },
      [self](const shard_snapshot_msg& m) {
        auto& st = self->state;
        auto d = decode(m);
        if (!d) {
          report(self, event_kind::checkpoint_failed, "a shard sent an invalid snapshot: " + describe(d.error()), 0);
          return;
        }
        auto id = d->root().getCheckpoint();
        if (id <= st.last_committed || id <= st.last_lost)
          return;  // a shard replaying steps re-sends checkpoints already durable
        if (!st.pending.count(id))
          self->delayed_send(self, st.cfg.incomplete_timeout, expire_atom::value, id);
        auto& slot = st.pending[id];
        slot.insert_or_assign(d->root().getShard(), checkpointer_state::arrived{m, d->root().getStep()});
        if (slot.size() < st.cfg.num_shards)
          return;
        auto shards = std::move(slot);
        // Older incomplete checkpoints can no longer complete usefully.
        st.pending.erase(st.pending.begin(), st.pending.upper_bound(id));
        write_checkpoint(self, id, shards);
      },
    };
  };
  // In a cluster the coordinator's checkpointer is referenced from other
  // processes, and CAF 0.17 never releases a detached actor that remote
  // nodes knew (the actor system then waits for it forever at shutdown): it
  // runs on the scheduler there, where no training happens.
  if (!env.detached)
    return sys.spawn(behavior);
  return sys.spawn<caf::detached>(behavior);
}

}  // namespace keel
