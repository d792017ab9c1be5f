// A parameter_shard's periodic checkpoints (parameter_shard.hpp): taking
// each snapshot at its step boundary, a base or a delta (snapshot_chain),
// built in memory and written by the shard's snapshot_writer, or streamed
// into its file by the shard itself when it is large (shard_stream.hpp) and
// made durable by the writer; then reporting its part to the checkpointer,
// or its failure, and writing a failed in-memory snapshot again.
#include <chrono>
#include <string>

#include <caf/all.hpp>

#include "actors/core/atoms.hpp"
#include "actors/core/retry_backoff.hpp"
#include "actors/core/shard_delta.hpp"
#include "actors/core/shard_stream.hpp"
#include "actors/core/thread_clock.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "actors/ps/shard_state.hpp"
#include "actors/ps/snapshot_replica.hpp"
#include "actors/ps/snapshot_writer.hpp"
#include "storage/store_layout.hpp"

namespace keel::shard_detail {

namespace {

// Reports the newest written part to the checkpointer.
void send_part(shard_actor* self) {
  auto& st = self->state;
  if (!st.checkpointer || !st.written)
    return;
  st.links.send(self, "checkpointer", st.checkpointer, msg_kind::snapshot, *st.written);
}

checkpoint_manifest_msg part_of(uint64_t checkpoint, uint64_t step, const manifest_entry& e, const run_identity& run) {
  size_t words = 40 + e.file.size() / 8;
  for (auto& l : e.chain) words += 6 + l.file.size() / 8;
  return build<schema::CheckpointManifest>(words, [&](schema::CheckpointManifest::Builder b) {
    b.setCheckpoint(checkpoint);
    b.setStep(step);
    b.setRunId(run.run_id);
    b.setConfigHash(run.config_hash);
    set_entry(b.initShards(1)[0], e);
  });
}

// The checkpointer hears that checkpoint `id` (at `step`) failed here, and
// why; when none is up, once one is.
void report_failed(shard_actor* self, uint64_t id, uint64_t step, const std::string& why) {
  auto& st = self->state;
  if (st.checkpointer)
    return self->send(st.checkpointer, write_failed_atom::value, id, st.core.config().shard, step, why);
  if (st.unreported.size() == shard_state::max_unreported)
    st.unreported.pop_front();
  st.unreported.push_back({id, step, why});
}

// The write of checkpoint `id` (at `step`) failed: the checkpointer hears
// why, and the snapshot is written again after the backoff unless a newer
// one has replaced it by then.
void write_failed(shard_actor* self, uint64_t id, uint64_t step, const caf::error& err) {
  auto& st = self->state;
  report_failed(self, id, step, describe(err));
  auto wait = retry_backoff(st.retry_min, st.retry_max, st.write_failures++);
  self->delayed_send(self, wait, retry_atom::value, id);
}

// A copy of the file just written, with the chain it extends, for the peer's
// replica (fire-and-forget: a peer that is down drops it).
void send_copy(shard_actor* self, uint64_t id, const manifest_entry& e, const shard_snapshot_msg& snap) {
  auto& st = self->state;
  if (st.peer_replica)
    self->send(st.peer_replica, replica_keep_atom::value, st.run.run_id, st.core.config().shard,
               chain_link{id, e.file, e.bytes, e.crc32c}, e.chain, snap);
}

// Checkpoint `id`'s file is durable: its part (with the chain it extends)
// goes to the checkpointer, and its frame, if it was built in memory, to the
// peer's replica.
void on_written(shard_actor* self, uint64_t id, uint64_t step, manifest_entry& e,
                const std::optional<shard_snapshot_msg>& snap) {
  auto& st = self->state;
  st.write_failures = 0;
  auto chain = st.chain.written(id, e);
  if (!chain)  // a delta on a file never written: lost, not retried
    return report_failed(self, id, step, describe(chain.error()));
  if (st.written && st.written_id > id)
    return;  // a newer one was written first
  e.chain = std::move(*chain);
  st.written = part_of(id, step, e, st.run);
  st.written_id = id;
  send_part(self);
  if (snap)
    send_copy(self, id, e, *snap);
}

// Hands the newest snapshot to the writer; once its file is durable the
// snapshot is let go (on_written).
void write_newest(shard_actor* self) {
  auto& st = self->state;
  if (!st.newest || !st.writer)
    return;
  auto id = st.newest_id;
  auto step = st.newest_step;
  self->request(st.writer, caf::infinite, write_atom::value, *st.newest, st.newest_tag)
    .then(
      [self, id, step, snap = *st.newest](manifest_entry& e) {
        auto& st = self->state;
        if (st.newest && st.newest_id == id)
          st.newest.reset();
        on_written(self, id, step, e, snap);
      },
      [self, id, step](caf::error& err) {
        self->state.chain.failed(id);
        write_failed(self, id, step, err);
      });
}

// Whether checkpoint `id`'s snapshot (a delta on `parent`, or a base) is
// streamed into its file rather than built in memory: when it is large,
// and no peer copy needs its frame.
bool streams(const shard_state& st, const std::optional<delta_parent>& parent) {
  if (st.stream_above == UINT64_MAX || st.peer_replica || !st.writer || !st.io)
    return false;
  return st.stream_above == 0 || snapshot_bytes_estimate(st.core, parent.has_value()) >= st.stream_above;
}

// What a snapshot of the shard holds changes only with a push it receives
// or a step it applies; both counts only grow, so an equal sum means an
// unchanged shard.
uint64_t state_stamp(const shard_core& core) {
  uint64_t stamp = core.version();
  for (uint32_t w = 0; w < core.config().num_workers; ++w) stamp += core.received(w);
  return stamp;
}

// A streamed snapshot of checkpoint `id`, taken at state_stamp `version`,
// failed: the checkpointer hears why. Its bytes are gone, but if the shard
// is still at that stamp when the backoff has passed (its workers wait at
// this checkpoint step for it to commit, as they do when storage fails for
// a while and their logs reach their bound) the same state is streamed
// again, as a base (write_again).
void stream_failed(shard_actor* self, uint64_t id, uint64_t step, uint64_t version, const std::string& why) {
  auto& st = self->state;
  report_failed(self, id, step, why);
  st.restream = std::make_pair(id, version);
  auto wait = retry_backoff(st.retry_min, st.retry_max, st.write_failures++);
  self->delayed_send(self, wait, retry_atom::value, id);
}

// Streams checkpoint `id`'s snapshot into its file on this thread (the
// state must hold still meanwhile), then has the writer make it durable.
// A failed stream takes nothing (its changes stay for the next snapshot); a
// failed commit is not written again unless the state holds still
// (stream_failed): the chain hears it failed, so the next snapshot is a base.
void stream_newest(shard_actor* self, uint64_t id, const std::optional<delta_parent>& parent) {
  auto& st = self->state;
  const auto step = st.core.progress_clock();
  const auto version = state_stamp(st.core);
  const auto shard = st.core.config().shard;
  const auto tag = st.tags();
  const auto name = snapshot_name(id, shard, tag);
  const auto t0 = std::chrono::steady_clock::now();
  const auto cpu0 = thread_cpu_us();
  auto s = stream_snapshot_of(st.core, *st.io, st.checkpoint_dir, name, std::to_string(tag), id, now_unix_ms(), st.run,
                              parent);
  if (!s)
    return stream_failed(self, id, step, version, "streaming the snapshot: " + describe(s.error()));
  const auto stream_cpu_us = static_cast<uint64_t>(thread_cpu_us() - cpu0);
  const auto stream_us = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  st.core.clear_changes();
  st.chain.taken(id, name, s->summary.file_bytes, parent);
  st.newest.reset();  // a newer snapshot replaces one waiting to be written again
  st.restream.reset();
  auto file = std::make_shared<streamed_snapshot>(std::move(*s));
  self->request(st.writer, caf::infinite, seal_atom::value, std::move(file))
    .then(
      [self, id, step, stream_us, stream_cpu_us](manifest_entry& e) {
        e.write_us += stream_us;
        e.write_cpu_us += stream_cpu_us;
        on_written(self, id, step, e, std::nullopt);
      },
      [self, id, step, version](caf::error& err) {
        self->state.chain.failed(id);
        stream_failed(self, id, step, version, describe(err));
      });
}

}  // namespace

// Takes a snapshot whenever the progress clock enters a new multiple of
// snapshot_every. Under BSP that is exactly the step boundary, so every
// shard of a checkpoint holds the same step. A delta of what changed since
// the last one where the chain allows (snapshot_chain.hpp), else a base.
void maybe_snapshot(shard_actor* self) {
  auto& st = self->state;
  if (st.snapshot_every == 0)
    return;
  auto id = st.core.progress_clock() / st.snapshot_every;
  if (id <= st.last_snapshot_id)
    return;
  st.last_snapshot_id = id;
  auto parent = st.chain.next(st.core.delta_bytes_estimate(), st.core.changes_complete());
  if (streams(st, parent))
    return stream_newest(self, id, parent);
  st.restream.reset();  // a newer snapshot: the failed one's state is gone
  auto snap = parent ? delta_snapshot_of(st.core, id, now_unix_ms(), st.run, *parent, st.snapshot_memory)
                     : snapshot_of(st.core, id, now_unix_ms(), st.run, true, st.snapshot_memory);
  if (!snap)  // said at once, not left to the checkpoint's timeout (its changes stay for the next)
    return report_failed(self, id, st.core.progress_clock(), "taking the snapshot: " + describe(snap.error()));
  st.core.clear_changes();
  st.newest_tag = st.tags();
  st.chain.taken(id, snapshot_name(id, st.core.config().shard, st.newest_tag),
                 snap->frame()->size_words() * sizeof(capnp::word), parent);
  st.newest = std::move(*snap);
  st.newest_id = id;
  st.newest_step = st.core.progress_clock();
  write_newest(self);
}

// The backoff after a failed write of checkpoint `id` has passed.
void write_again(shard_actor* self, uint64_t id) {
  auto& st = self->state;
  if (st.newest && st.newest_id == id)
    return write_newest(self);
  // A streamed one again, from the very state it was taken of, else never.
  if (st.restream && st.restream->first == id && st.last_snapshot_id == id &&
      st.restream->second == state_stamp(st.core)) {
    st.restream.reset();
    stream_newest(self, id, std::nullopt);
  }
}

// The checkpointer's name changed hands: a new incarnation hears the write
// failures no checkpointer was up for, then gets the newest part again (its
// predecessor may have died before committing it).
void on_checkpointer(shard_actor* self, const supervision::directory_update& u) {
  auto& st = self->state;
  if (u.name != "checkpointer")
    return;
  if (u.state != supervision::name_state::up) {
    st.checkpointer = caf::actor{};
    return;
  }
  if (st.checkpointer == u.handle)
    return;
  st.checkpointer = u.handle;
  for (auto& f : st.unreported)
    report_failed(self, f.id, f.step, f.why);
  st.unreported.clear();
  send_part(self);
}

}  // namespace keel::shard_detail
