// Whole-tree recovery: a rollback to the newest valid checkpoint when local
// recovery is impossible, and the same read of the checkpoint directory for
// a run that resumes after its process died.
#include "actors/core/shard_snapshot.hpp"
#include "actors/job/job_impl.hpp"
#include "storage/snapshot_store.hpp"

namespace keel {

caf::expected<uint64_t> job::impl::load_newest_checkpoint() {
  start_from.clear();
  auto store = snapshot_store::open(cfg.checkpoint_dir, {cfg.keep_checkpoints});
  if (!store)
    return store.error();
  auto latest = (*store)->latest_valid();
  // What is newer than the checkpoint restored failed validation, and the
  // restarted run will write those ids again.
  auto keep = latest ? latest->checkpoint.manifest.checkpoint : 0;
  auto discarded = (*store)->discard_after(keep);
  if (!discarded)
    return discarded.error();
  for (auto id : *discarded) {
    auto e = make_job_event(event_kind::discarded, "checkpoint:" + std::to_string(id),
                            "newer than the checkpoint restored");
    e.checkpoint = id;
    record(std::move(e));
  }
  if (!latest)
    return uint64_t{0};
  for (auto& d : latest->skipped)
    record(make_job_event(event_kind::damaged, d.file, describe(d.reason)));
  for (auto& s : latest->checkpoint.snapshots)
    start_from.push_back(s.source());
  auto& m = latest->checkpoint.manifest;
  restored_checkpoint = m.checkpoint;
  return m.step;
}

caf::error job::impl::resume_from_newest_checkpoint() {
  auto step = load_newest_checkpoint();
  if (!step)
    return step.error();
  if (restored_checkpoint == 0)
    return make_error(errc::damaged_snapshot,
                      "nothing to resume: no checkpoint in " + cfg.checkpoint_dir.string() +
                        " validates (see keel inspect --verify)");
  auto where = "checkpoint " + std::to_string(restored_checkpoint) + " in " +
               cfg.checkpoint_dir.string();
  if (start_from.size() != cfg.shards)
    return make_error(errc::invalid_argument,
                      "cannot resume from " + where + ": it holds " +
                        std::to_string(start_from.size()) + " shard snapshots and this job has " +
                        std::to_string(cfg.shards) + " shards");
  for (uint32_t i = 0; i < cfg.shards; ++i) {
    auto d = decode<schema::ShardSnapshot>(start_from[i]);
    auto restored = d ? restore_shard(shard_cfgs[i], d->root())
                      : caf::expected<shard_core>(d.error());
    if (!restored)
      return make_error(errc::invalid_argument, "cannot resume from " + where + ": shard " +
                                                  std::to_string(i) + ": " +
                                                  describe(restored.error()));
  }
  checkpoints->start_at(*step);
  faults->skip_through(*step);
  resumed_step = *step;
  auto e = make_job_event(event_kind::restored, "root",
                          "resuming from checkpoint " + std::to_string(restored_checkpoint) +
                            " at step " + std::to_string(*step));
  e.checkpoint = restored_checkpoint;
  e.step = *step;
  record(std::move(e));
  return {};
}

// Restarts the whole tree from the newest checkpoint that validates.
caf::error job::impl::roll_back(const std::string& why) {
  record(make_job_event(event_kind::rollback, "root", why));
  ++result.rollbacks;
  // The job supervises the tree as root supervises its children: more
  // rollbacks within the period than the intensity allows end the job.
  if (auto err = rollbacks->admit(std::chrono::steady_clock::now(), why)) {
    record(make_job_event(event_kind::escalate, "root", describe(err)));
    return err;
  }
  if (tree) {
    tree->shutdown(std::chrono::seconds(30));
    tree.reset();
  }
  // A killed root's children die asynchronously: wait until the old
  // checkpointer is gone, so that no write of the old run races with the
  // store's cleanup and the rollback's own reading and discarding.
  if (auto it = handles.find(actor_id::checkpointer()); it != handles.end()) {
    auto old = it->second;
    auto& self = *ctl;
    self->monitor(old);
    bool gone = false;
    while (!gone)
      self->receive([&](caf::down_msg& dm) { gone = dm.source == old.address(); },
                    caf::after(std::chrono::seconds(30)) >> [&] { gone = true; });
  }
  faults->all_back();  // the whole tree starts afresh
  restored_checkpoint = 0;
  auto step = load_newest_checkpoint();
  if (!step)
    return step.error();
  checkpoints->rolled_back(*step);
  if (restored_checkpoint > 0) {
    auto e = make_job_event(event_kind::restored, "root",
                            "rolling back to checkpoint " + std::to_string(restored_checkpoint) +
                              " at step " + std::to_string(*step));
    e.checkpoint = restored_checkpoint;
    e.step = *step;
    record(std::move(e));
  } else {
    record(make_job_event(event_kind::restored, "root", "no valid checkpoint: restarting from step 0"));
  }
  ++epoch;
  return start_tree();
}

}  // namespace keel
