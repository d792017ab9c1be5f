// Whole-tree recovery: a rollback to the newest valid checkpoint when local
// recovery is impossible, and the same read of the checkpoint directory for
// a run that resumes after its process died. A rollback runs in three
// steps, each a continuation of the last: the old tree goes down (with its
// checkpointer, which may still be writing), the checkpoint is read, the
// new tree is launched.
#include "actors/core/shard_snapshot.hpp"
#include "actors/job/job_controller.hpp"
#include "actors/job/job_identity.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"
#include "storage/snapshot_store.hpp"

namespace keel {

namespace {

// Reads the newest valid checkpoint in the directory (recording what it
// skipped as damaged) and makes it the state the next tree starts from.
// Returns its step (0: none, start from scratch); sets restored_checkpoint.
caf::expected<uint64_t> load_newest_checkpoint(controller_actor* self) {
  auto& cfg = self->state.cfg;
  auto& run = self->state.run;
  auto& start_from = run.start_from;
  start_from.clear();
  store_options opts;
  opts.keep_last = cfg.checkpoints.keep;
  auto store = snapshot_store::open(cfg.checkpoints.dir, opts);
  if (!store)
    return store.error();
  // Every file is read and validated here, one at a time, and let go: the
  // shards read their own files again when they start.
  auto latest = (*store)->latest_verified();
  // A checkpoint of another run (copied in) or another configuration is
  // never this run's state: refused by name, before anything is discarded.
  if (latest)
    if (auto err = check_same_run(run.identity, latest->manifest.run,
                                  "checkpoint " + std::to_string(latest->manifest.checkpoint) +
                                    " in " + cfg.checkpoints.dir.string()))
      return err;
  // What is newer than the checkpoint restored failed validation, and the
  // restarted run will write those ids again.
  auto keep = latest ? latest->manifest.checkpoint : 0;
  auto discarded = (*store)->discard_after(keep);
  if (!discarded)
    return discarded.error();
  for (auto id : *discarded) {
    auto e = make_job_event(event_kind::discarded, "checkpoint:" + std::to_string(id),
                            "newer than the checkpoint restored");
    e.checkpoint = id;
    record(self, std::move(e));
  }
  if (!latest)
    return uint64_t{0};
  auto& m = latest->manifest;
  for (auto& d : latest->skipped)
    record(self, make_job_event(event_kind::damaged, d.file, describe(d.reason)));
  start_from = refs_of(std::filesystem::absolute(cfg.checkpoints.dir), m);
  run.restored_checkpoint = m.checkpoint;
  self->state.progress.checkpoints->restored(m.checkpoint, m.step);  // the last good checkpoint a storage failure names
  return m.step;
}

// Whether a shard of `cfg` could restore from `ref` (shapes, tables, layout,
// workers: its chain's base), read again here one shard at a time (latest_verified has
// checked every CRC already) and let go: refused by name before the run
// starts, rather than as a shard that cannot start.
caf::error check_resumable(const shard_config& cfg, const snapshot_ref& ref, uint32_t shard) {
  if (ref.entry.shard != shard)
    return make_error(errc::invalid_argument, "the checkpoint's snapshot " + ref.entry.file + " is of shard " +
                                                std::to_string(ref.entry.shard));
  auto pool = buffer_pool::create(0, 0);
  // A delta's layout is its chain's base's: that file is the one checked.
  auto snap = read_chain_link(*posix_io(), ref, 0, *pool, verify_mode::structure);
  if (!snap)
    return snap.error();
  return check_shard_snapshot(cfg, snap->root());
}

// The old tree is gone: the newest valid checkpoint becomes the state the
// new tree starts from.
void restart_from_checkpoint(controller_actor* self) {
  auto& st = self->state;
  st.faults->all_back();  // the whole tree starts afresh
  st.run.restored_checkpoint = 0;
  auto step = load_newest_checkpoint(self);
  if (!step)
    return end_job(self, step.error());
  st.progress.checkpoints->rolled_back(*step);
  st.run.first_step = *step;
  if (auto err = apply_leaving(self, *step))  // workers no node could run leave here
    return end_job(self, err);
  if (auto id = st.run.restored_checkpoint; id > 0) {
    auto e = make_job_event(event_kind::restored, "root",
                            "rolling back to checkpoint " + std::to_string(id) + " at step " +
                              std::to_string(*step));
    e.checkpoint = id;
    e.step = *step;
    record(self, std::move(e));
  } else {
    record(self, make_job_event(event_kind::restored, "root", "no valid checkpoint: restarting from step 0"));
  }
  launch_tree(self);
}

}  // namespace

caf::error resume_from_newest_checkpoint(controller_actor* self) {
  auto& cfg = self->state.cfg;
  auto& run = self->state.run;
  auto& start_from = run.start_from;
  auto& restored_checkpoint = run.restored_checkpoint;
  auto step = load_newest_checkpoint(self);
  if (!step)
    return step.error();
  if (restored_checkpoint == 0)
    return make_error(errc::damaged_snapshot,
                      "nothing to resume: no checkpoint in " + cfg.checkpoints.dir.string() +
                        " validates (see keel inspect --verify)");
  auto where = "checkpoint " + std::to_string(restored_checkpoint) + " in " +
               cfg.checkpoints.dir.string();
  if (start_from.size() != cfg.training.shards)
    return make_error(errc::invalid_argument,
                      "cannot resume from " + where + ": it holds " +
                        std::to_string(start_from.size()) + " shard snapshots and this job has " +
                        std::to_string(cfg.training.shards) + " shards");
  for (uint32_t i = 0; i < cfg.training.shards; ++i)
    if (auto refused = check_resumable(run.shard_cfgs[i], start_from[i], i))
      return make_error(errc::invalid_argument, "cannot resume from " + where + ": shard " +
                                                  std::to_string(i) + ": " + describe(refused));
  self->state.progress.checkpoints->start_at(*step);
  self->state.faults->skip_through(*step);
  run.resumed_step = *step;
  run.first_step = *step;
  // Progress points up to the resumed step were the first run's: the next
  // one is the first this run reaches (else it reported the step it resumed
  // at, with no steps run: "samples/s 0").
  if (auto every = self->state.cfg.progress.every; every > 0)
    self->state.progress.last_progress = *step - *step % every;
  auto e = make_job_event(event_kind::restored, "root",
                          "resuming from checkpoint " + std::to_string(restored_checkpoint) +
                            " at step " + std::to_string(*step));
  e.checkpoint = restored_checkpoint;
  e.step = *step;
  record(self, std::move(e));
  return {};
}

void roll_back(controller_actor* self, const std::string& why) {
  auto& st = self->state;
  auto& run = st.run;
  record(self, make_job_event(event_kind::rollback, "root", why));
  ++st.readout.result.rollbacks;
  // The job supervises the tree as root supervises its children: more
  // rollbacks within the period than the intensity allows end the job.
  if (auto err = run.rollbacks->admit(std::chrono::steady_clock::now(), why)) {
    record(self, make_job_event(event_kind::escalate, "root", describe(err)));
    return end_job(self, err);
  }
  // From here the old tree's reports are stale (the new tree is launched
  // with this epoch).
  run.core.rolling_back();
  // A killed root's children die asynchronously: the old checkpointer must
  // be gone before the store is read and cleaned, so that no write of the
  // old run races with the rollback's own reading and discarding.
  std::vector<caf::actor_addr> old;
  if (auto it = run.handles.find(actor_id::checkpointer()); it != run.handles.end()) {
    self->monitor(it->second);
    old.push_back(it->second.address());
  }
  if (run.tree && !run.root_down)
    old.push_back(run.tree->root().address());
  run.tree.reset();  // asks the root to stop, if it is not gone already
  run.handles.clear();
  after_downs(self, std::move(old), std::chrono::seconds(60), [self] { restart_from_checkpoint(self); });
}

}  // namespace keel
