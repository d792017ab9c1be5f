#include "actors/ps/checkpointer.hpp"


#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include <caf/all.hpp>

#include "actors/core/atoms.hpp"
#include "actors/core/thread_clock.hpp"
#include "actors/core/crash.hpp"
#include "actors/core/job_event.hpp"
#include "actors/core/retry_backoff.hpp"
#include "messages/decode.hpp"
#include "storage/snapshot_store.hpp"

namespace keel {

namespace {

struct checkpointer_state {
  checkpointer_config cfg;
  std::unique_ptr<snapshot_store> store;
  uint64_t last_committed = 0;
  uint64_t last_lost = 0;  // the newest checkpoint given up as incomplete
  using part_set = std::map<uint32_t, committed_shard>;  // shard -> its part
  struct pending_checkpoint {
    part_set parts;
    std::chrono::steady_clock::time_point news;  // the last report of any shard
  };
  std::map<uint64_t, pending_checkpoint> pending;  // checkpoint id -> parts so far
  // The newest complete checkpoint whose manifest write failed, kept to be
  // written again.
  std::optional<std::pair<uint64_t, part_set>> retained;
  uint32_t failures = 0;  // manifest writes failed in a row since the last commit
};

using checkpointer_actor = caf::stateful_actor<checkpointer_state>;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

void report(checkpointer_actor* self, event_kind kind, std::string detail, uint64_t step,
            uint64_t checkpoint = 0, bool failed = false) {
  auto& st = self->state;
  auto e = make_job_event(kind, "checkpointer", std::move(detail));
  e.step = step;
  e.checkpoint = checkpoint;
  e.failed = failed;  // storage, not a lost part
  if (st.cfg.job)
    self->send(st.cfg.job, std::move(e));
}

// CPU time of the calling thread, in microseconds.
// A manifest write failed: it is written again after the backoff, unless
// a newer checkpoint has completed by then.
void retain(checkpointer_actor* self, uint64_t id, const checkpointer_state::part_set& parts) {
  auto& st = self->state;
  st.retained.emplace(id, parts);
  auto wait = retry_backoff(st.cfg.retry_min, st.cfg.retry_max, st.failures++);
  self->delayed_send(self, wait, retry_atom::value, id);
}

void commit_checkpoint(checkpointer_actor* self, uint64_t id, const checkpointer_state::part_set& parts) {
  auto& st = self->state;
  st.retained.reset();
  checkpoint_manifest m;
  m.checkpoint = id;
  m.created_unix_ms = unix_ms();
  checkpoint_committed note;
  note.checkpoint = id;
  int64_t slowest = 0;
  for (auto& [shard, part] : parts) {
    m.step = std::max(m.step, part.step);
    m.shards.push_back(part.snapshot.entry);
    note.shards.push_back(part);
    slowest = std::max(slowest, static_cast<int64_t>(part.snapshot.entry.write_us));
    note.write_cpu_us += static_cast<int64_t>(part.snapshot.entry.write_cpu_us);
  }
  note.step = m.step;
  auto t0 = std::chrono::steady_clock::now();
  auto cpu0 = thread_cpu_us();
  auto r = st.store->commit(m);
  note.write_cpu_us += thread_cpu_us() - cpu0;
  note.write_us = slowest + std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - t0).count();
  if (!r) {
    report(self, event_kind::checkpoint_failed,
           "checkpoint " + std::to_string(id) + " at step " + std::to_string(m.step) + ": " +
             describe(r.error()) + "; checkpoint " + std::to_string(st.last_committed) + " stays in force",
           m.step, id, true);
    retain(self, id, parts);
    return;
  }
  st.last_committed = id;
  st.failures = 0;
  // The note first: whoever sees the event can rely on the job knowing it.
  self->send(st.cfg.job, std::move(note));
  report(self, event_kind::checkpoint,
         "checkpoint " + std::to_string(id) + " committed at step " + std::to_string(m.step), m.step, id);
}

// The backoff after a failed manifest write of `id` has passed.
void commit_again(checkpointer_actor* self, uint64_t id) {
  auto& st = self->state;
  if (!st.retained || st.retained->first != id || id <= st.last_committed)
    return;  // committed since, or replaced by a newer checkpoint
  auto parts = std::move(st.retained->second);
  commit_checkpoint(self, id, parts);
}

bool settled(const checkpointer_state& st, uint64_t id) {
  return id <= st.last_committed || id <= st.last_lost;
}

// The pending checkpoint `id`, its news now (created with its expiry timer).
checkpointer_state::pending_checkpoint& news_of(checkpointer_actor* self, uint64_t id) {
  auto& st = self->state;
  if (!st.pending.count(id))
    self->delayed_send(self, st.cfg.incomplete_timeout, expire_atom::value, id);
  auto& p = st.pending[id];
  p.news = std::chrono::steady_clock::now();
  return p;
}

// A shard's part: its snapshot file is durable.
void on_part(checkpointer_actor* self, const checkpoint_manifest_msg& m) {
  auto& st = self->state;
  auto d = decode(m);
  if (!d || d->root().getShards().size() != 1) {
    report(self, event_kind::checkpoint_failed,
           "a shard reported an invalid part of a checkpoint: " +
             (d ? std::string("it names ") + std::to_string(d->root().getShards().size()) + " files, not one"
                : describe(d.error())),
           0);
    return;
  }
  auto r = d->root();
  auto id = r.getCheckpoint();
  if (settled(st, id))
    return;  // a shard replaying steps reports checkpoints already settled
  auto e = r.getShards()[0];
  if (r.getRunId() != st.cfg.run_id || r.getConfigHash() != st.cfg.config_hash) {
    report(self, event_kind::checkpoint_failed,
           "shard " + std::to_string(e.getShard()) + " reported a part of checkpoint " + std::to_string(id) +
             " of run '" + r.getRunId().cStr() + "', not of this run ('" + st.cfg.run_id + "'): ignored",
           r.getStep(), id);
    return;
  }
  committed_shard part;
  part.shard = e.getShard();
  part.step = r.getStep();
  part.snapshot = snapshot_ref{st.cfg.dir, id, part.step, entry_of(e), st.cfg.run_id, st.cfg.config_hash};
  auto& slot = news_of(self, id).parts;
  slot.insert_or_assign(part.shard, std::move(part));
  if (slot.size() < st.cfg.num_shards)
    return;
  auto parts = std::move(slot);
  // Older incomplete checkpoints can no longer complete usefully.
  st.pending.erase(st.pending.begin(), st.pending.upper_bound(id));
  commit_checkpoint(self, id, parts);
}

// A shard could not write its file of checkpoint `id`; it tries again.
void on_write_failed(checkpointer_actor* self, uint64_t id, uint32_t shard, uint64_t step,
                     const std::string& why) {
  auto& st = self->state;
  if (settled(st, id))
    return;
  news_of(self, id);  // not lost while its shards keep trying
  report(self, event_kind::checkpoint_failed,
         "checkpoint " + std::to_string(id) + " at step " + std::to_string(step) + ": shard " +
           std::to_string(shard) + " could not write its snapshot: " + why + "; checkpoint " +
           std::to_string(st.last_committed) + " stays in force",
         step, id, true);
}

// No shard has reported on `id` for incomplete_timeout: it is lost.
void on_expire(checkpointer_actor* self, uint64_t id) {
  auto& st = self->state;
  auto it = st.pending.find(id);
  if (it == st.pending.end())
    return;  // committed, or superseded by a newer one
  auto quiet = std::chrono::steady_clock::now() - it->second.news;
  if (quiet < st.cfg.incomplete_timeout) {
    self->delayed_send(self, st.cfg.incomplete_timeout - quiet, expire_atom::value, id);
    return;
  }
  uint64_t step = 0;
  std::string have;
  for (auto& [shard, part] : it->second.parts) {
    step = std::max(step, part.step);
    have += (have.empty() ? "" : ", ") + std::to_string(shard);
  }
  st.pending.erase(st.pending.begin(), std::next(it));
  st.last_lost = id;
  report(self, event_kind::checkpoint_failed,
         "checkpoint " + std::to_string(id) + " at step " + std::to_string(step) + ": lost, only shard(s) " +
           (have.empty() ? std::string("none") : have) + " of " + std::to_string(st.cfg.num_shards) +
           " reported a written snapshot within " + std::to_string(st.cfg.incomplete_timeout.count()) +
           " ms; checkpoint " + std::to_string(st.last_committed) + " stays in force",
         step, id);
}

}  // namespace

caf::expected<caf::actor> spawn_checkpointer(caf::actor_system& sys, checkpointer_config cfg,
                                             checkpointer_env env) {
  store_options so;
  so.keep_last = cfg.keep_last;
  so.run = {cfg.run_id, cfg.config_hash, cfg.config};
  so.shards_write = true;
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
      [self](retry_atom, uint64_t id) { commit_again(self, id); },
      [self](expire_atom, uint64_t id) { on_expire(self, id); },
      [self](const checkpoint_manifest_msg& m) { on_part(self, m); },
      [self](write_failed_atom, uint64_t id, uint32_t shard, uint64_t step, const std::string& why) {
        on_write_failed(self, id, shard, step, why);
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
