// The parameter_shard actor (parameter_shard.hpp): its state beside its
// behaviour, which reads as the protocol: a push is applied by the core and
// acked, a pull is answered once the consistency rule allows, a status
// request is answered from the core. Messages cross the shard's links
// through link_ends (actors/faults/link_ends.hpp), the decorator where the
// job's link faults act; nothing here knows of them.
#include "actors/ps/parameter_shard.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <random>
#include <vector>

#include <caf/all.hpp>

#include "actors/core/actor_id.hpp"
#include "actors/core/atoms.hpp"
#include "actors/core/checkpoint_coordinator.hpp"
#include "actors/core/crash.hpp"
#include "actors/core/shard_delta.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/core/snapshot_chain.hpp"
#include "actors/faults/link_ends.hpp"
#include "actors/ps/shard_restore.hpp"
#include "actors/ps/snapshot_replica.hpp"
#include "actors/ps/snapshot_writer.hpp"
#include "models/model.hpp"
#include "storage/store_layout.hpp"
#include "supervision/directory.hpp"
#include "supervision/protocol.hpp"

namespace keel {

namespace {

struct pending_pull {
  uint64_t clock;
  decoded<schema::PullRequest> request;
  reply_to<pull_reply_msg> to;
};

struct last_reply {
  std::optional<pull_reply_msg> reply;
  uint64_t clock = 0;
  uint64_t version = 0;
  std::vector<uint64_t> dense;  // begin, end of each range
  std::vector<uint64_t> sparse_keys;

  bool answers(schema::PullRequest::Reader req, uint64_t shard_version) const {
    if (!reply || clock != req.getClock() || version != shard_version)
      return false;
    auto ranges = req.getDense();
    auto keys = req.getSparseKeys();
    if (ranges.size() * 2 != dense.size() || keys.size() != sparse_keys.size())
      return false;
    for (unsigned i = 0; i < ranges.size(); ++i)
      if (ranges[i].getBegin() != dense[2 * i] || ranges[i].getEnd() != dense[2 * i + 1])
        return false;
    for (unsigned i = 0; i < keys.size(); ++i)
      if (keys[i] != sparse_keys[i])
        return false;
    return true;
  }

  void remember(schema::PullRequest::Reader req, uint64_t shard_version, pull_reply_msg r) {
    clock = req.getClock();
    version = shard_version;
    dense.clear();
    for (auto range : req.getDense()) {
      dense.push_back(range.getBegin());
      dense.push_back(range.getEnd());
    }
    sparse_keys.clear();
    for (auto k : req.getSparseKeys())
      sparse_keys.push_back(k);
    reply = std::move(r);
  }
};

struct shard_state {
  shard_core core;
  last_reply replied;
  std::deque<pending_pull> pulls;  // waiting for the consistency rule
  uint64_t snapshot_every = 0;
  uint64_t last_snapshot_id = 0;  // the restored or last taken checkpoint id
  caf::actor checkpointer;        // its current incarnation (invalid while none is up)
  caf::actor writer;              // its snapshot_writer (with snapshot_every)
  caf::actor peer_replica;        // where each written file's frame goes (may be invalid)
  // The newest periodic snapshot taken and not yet written (let go once its
  // file is durable), and the part of the newest one written.
  std::optional<shard_snapshot_msg> newest;
  uint64_t newest_id = 0, newest_step = 0;
  uint64_t newest_tag = 0;  // its file's name tag (a write again reuses it: snapshot_writer.hpp)
  snapshot_chain chain;     // bases and deltas: which the next snapshot is
  std::optional<checkpoint_manifest_msg> written;
  uint64_t written_id = 0;
  uint32_t write_failures = 0;  // in a row, for the backoff
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5000};
  std::mt19937_64 tags{std::random_device{}()};  // file name tags (snapshot_writer.hpp)
  // Where the periodic snapshots' memory comes from and returns to, so each
  // reuses the pages of one superseded before it (no fresh page faults).
  std::shared_ptr<buffer_pool> snapshot_memory = snapshot_pool();
  link_ends links;  // to the workers and the checkpointer, where link faults act
  uint64_t epoch = 0;  // this incarnation's fencing epoch (0: unfenced)
  run_identity run;    // stamped on every snapshot (only the id and the hash)
};

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// The reply to a pull the rule allows now: the last one built when it
// answers the same request, else a new one. A pull of table rows is always
// read afresh: its keys differ from worker to worker and step to step.
caf::expected<pull_reply_msg> read_reply(shard_state& st, schema::PullRequest::Reader req) {
  const bool cacheable = req.getTables().size() == 0;
  if (cacheable && st.replied.answers(req, st.core.version()))
    return *st.replied.reply;
  frame_builder fb(256 + req.getSparseKeys().size() * 2);
  auto reply = fb.message().initRoot<schema::PullReply>();
  reply.setVersion(schema::PROTOCOL_VERSION);
  reply.setShardEpoch(st.epoch);
  if (auto err = st.core.read(req, reply, &fb))
    return err;
  pull_reply_msg out(fb.finish());
  if (cacheable)
    st.replied.remember(req, st.core.version(), out);
  return out;
}

push_ack_msg make_ack(uint32_t worker, uint64_t seq, const push_outcome& o, uint64_t version,
                      uint32_t shard, uint64_t epoch) {
  return build<schema::PushAck>(32 + o.reason.size() / 8, [&](schema::PushAck::Builder b) {
    b.setShardEpoch(epoch);
    b.setWorker(worker);
    b.setSeq(seq);
    b.setShard(shard);
    b.setShardVersion(version);
    b.setStatus(o.status);
    b.setReason(o.reason);
    b.setExpectedSeq(o.expected_seq);
  });
}

using shard_actor = caf::stateful_actor<shard_state>;

// Fencing: a request naming epoch `named` is for this incarnation when it
// names none, or this one. A newer one means the job has replaced this
// incarnation: it stops, so it never applies or acknowledges anything again.
caf::error check_addressed(shard_actor* self, uint64_t named) {
  auto own = self->state.epoch;
  if (named == 0 || own == 0 || named == own)
    return {};
  auto name = to_string(actor_id::shard(self->state.core.config().shard));
  auto err = make_error(errc::stale_incarnation,
                        name + " epoch " + std::to_string(own) + " refused a message for epoch " +
                            std::to_string(named));
  if (named > own)
    self->quit(make_error(errc::stale_incarnation,
                          name + " epoch " + std::to_string(own) + " was replaced by epoch " +
                              std::to_string(named)));
  return err;
}

// Serves every held pull that the rule now allows, in arrival order.
void serve_pulls(shard_actor* self) {
  auto& st = self->state;
  for (auto it = st.pulls.begin(); it != st.pulls.end();) {
    if (!st.core.can_serve(it->clock)) {
      ++it;
      continue;
    }
    auto reply = read_reply(st, it->request.root());
    if (reply)
      st.links.answer(self, it->to, std::move(*reply));
    else
      it->to.fail(reply.error());
    it = st.pulls.erase(it);
  }
}

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

void write_newest(shard_actor* self);

// The write of checkpoint `id` (at `step`) failed: the checkpointer hears
// why, and the snapshot is written again after the backoff unless a newer
// one has replaced it by then.
void write_failed(shard_actor* self, uint64_t id, uint64_t step, const caf::error& err) {
  auto& st = self->state;
  if (st.checkpointer)
    self->send(st.checkpointer, write_failed_atom::value, id, st.core.config().shard, step, describe(err));
  auto wait = write_retry_backoff(st.retry_min, st.retry_max, st.write_failures++);
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

// Hands the newest snapshot to the writer; once its file is durable the
// snapshot is let go, its part (with the chain it extends) reported and its
// copy sent to the peer.
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
        st.write_failures = 0;
        if (st.newest && st.newest_id == id)
          st.newest.reset();
        auto chain = st.chain.written(id, e);
        if (!chain) {  // a delta on a file never written: lost, not retried
          if (st.checkpointer)
            self->send(st.checkpointer, write_failed_atom::value, id, st.core.config().shard, step,
                       describe(chain.error()));
          return;
        }
        if (st.written && st.written_id > id)
          return;  // a newer one was written first
        e.chain = std::move(*chain);
        st.written = part_of(id, step, e, st.run);
        st.written_id = id;
        send_part(self);
        send_copy(self, id, e, snap);
      },
      [self, id, step](caf::error& err) {
        self->state.chain.failed(id);
        write_failed(self, id, step, err);
      });
}

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
  auto snap = parent ? delta_snapshot_of(st.core, id, now_unix_ms(), st.run, *parent, st.snapshot_memory)
                     : snapshot_of(st.core, id, now_unix_ms(), st.run, true, st.snapshot_memory);
  if (!snap) {  // said at once, not left to the checkpoint's timeout (its changes stay for the next)
    if (st.checkpointer)
      self->send(st.checkpointer, write_failed_atom::value, id, st.core.config().shard, st.core.progress_clock(),
                 "taking the snapshot: " + describe(snap.error()));
    return;
  }
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
    write_newest(self);
}

// The checkpointer's name changed hands: a new incarnation gets the newest
// part again (its predecessor may have died before committing it).
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
  send_part(self);
}

// A push: the core applies it (or refuses it, saying why) and the ack says
// which. A push that completes a step may make a snapshot due and lets held
// pulls through.
caf::expected<push_ack_msg> on_push(shard_actor* self, decoded<schema::Push> push) {
  auto& st = self->state;
  if (auto err = check_addressed(self, push.root().getShardEpoch()))
    return err;
  auto worker = push.root().getWorker();
  auto seq = push.root().getSeq();
  auto o = st.core.offer(std::move(push));
  auto ack = make_ack(worker, seq, o, st.core.version(), st.core.config().shard, st.epoch);
  if (o.status == schema::PushAck::Status::APPLIED || o.steps_applied > 0) {
    maybe_snapshot(self);
    serve_pulls(self);
  }
  return ack;
}

// A pull: answered now if the consistency rule allows its clock, else held
// until a push moves the shard far enough (serve_pulls).
void on_pull(shard_actor* self, decoded<schema::PullRequest> req, reply_to<pull_reply_msg> to) {
  auto& st = self->state;
  if (auto err = check_addressed(self, req.root().getShardEpoch()))
    return to.fail(std::move(err));
  auto clock = req.root().getClock();
  if (!st.core.can_serve(clock)) {
    st.pulls.push_back({clock, std::move(req), std::move(to)});
    return;
  }
  auto reply = read_reply(st, req.root());
  if (!reply)
    return to.fail(reply.error());
  st.links.answer(self, to, std::move(*reply));
}

// A worker asks what this shard has of it (after a restart of either).
caf::result<uint64_t, uint64_t, uint64_t, uint64_t> on_status(shard_actor* self,
                                                               uint32_t worker) {
  auto& st = self->state;
  if (worker >= st.core.config().num_workers)
    return make_error(errc::invalid_argument,
                      "worker " + std::to_string(worker) + " is not one of this job's workers");
  auto rp = self->make_response_promise<uint64_t, uint64_t, uint64_t, uint64_t>();
  st.links.receive(self, worker, msg_kind::status, [self, rp, worker]() mutable {
    auto& core = self->state.core;
    rp.deliver(core.received(worker), core.applied(worker), core.bsp_clock(), self->state.epoch);
  });
  return rp;
}

caf::behavior shard_behavior(shard_actor* self) {
  return {
    [self](const push_msg& m) -> caf::result<push_ack_msg> {
      // (A refused push is answered with its error: see check_addressed.)
      return self->state.links.request(
        self, m, [self](decoded<schema::Push> push) { return on_push(self, std::move(push)); });
    },
    [self](const pull_request_msg& m) -> caf::result<pull_reply_msg> {
      return self->state.links.request_later(
        self, m, [self](decoded<schema::PullRequest> req, reply_to<pull_reply_msg> to) {
          on_pull(self, std::move(req), std::move(to));
        });
    },
    [self](status_atom, uint32_t worker) { return on_status(self, worker); },
    [self](fence_atom, uint64_t epoch) { check_addressed(self, epoch); },
    [self](const snapshot_request_msg& m) -> caf::result<shard_snapshot_msg> {
      auto req = decode(m);
      if (!req)
        return req.error();
      return snapshot_of(self->state.core, req->root().getCheckpoint(), now_unix_ms(), self->state.run);
    },
    [self](params_atom) -> caf::result<shard_snapshot_msg> {
      return snapshot_of(self->state.core, 0, now_unix_ms(), self->state.run, false);  // tables as digests
    },
    [self](const supervision::directory_update& u) { on_checkpointer(self, u); },
    [self](link_release_atom, uint64_t id) { self->state.links.release(id); },
    [self](retry_atom, uint64_t id) { write_again(self, id); },
    [](crash_atom) { throw std::runtime_error("injected exception"); },
  };
}

}  // namespace

table_row_source model_table_rows(std::shared_ptr<const model> m, uint64_t seed) {
  return [m = std::move(m), seed](uint32_t table, uint64_t key, float* out, uint32_t dim) {
    // Checked by the shard's construction: the table exists and out has dim floats.
    (void)m->initial_rows(seed, table, span<const uint64_t>(&key, 1), span<float>(out, dim));
  };
}


caf::expected<caf::actor> spawn_parameter_shard(caf::actor_system& sys, parameter_shard_config cfg,
                                                parameter_shard_env env) {
  auto every = cfg.snapshot_every_steps;
  if (every > 0 && cfg.directory && cfg.checkpoint_dir.empty())
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.core.shard) +
                                                " takes snapshots every " + std::to_string(every) +
                                                " steps but has no checkpoint directory to write them to");
  auto memory = snapshot_pool();
  auto begun = starting_core(sys, cfg, env, *memory);
  if (!begun)
    return begun.error();
  auto directory = cfg.directory;
  auto faults = env.faults;
  auto epoch = cfg.epoch;
  run_identity run{cfg.run_id, cfg.config_hash, {}};
  auto writer = every > 0 && directory ? spawn_snapshot_writer(sys, cfg.checkpoint_dir, env.io) : caf::actor{};
  auto retry = std::make_pair(cfg.retry_min, cfg.retry_max);
  auto chain = cfg.chain;
  auto peer = cfg.peer_replica;
  return sys.spawn([b = std::make_shared<shard_start>(std::move(*begun)), every, directory, faults, epoch, run,
                    writer, retry, memory, chain, peer](shard_actor* self) mutable {
    self->state.core = std::move(b->core);
    self->state.chain = snapshot_chain(chain);
    self->state.chain.restored(std::move(b->chain));
    self->state.epoch = epoch;
    self->state.run = run;
    self->set_exception_handler(exception_as_error);
    self->state.snapshot_every = every;
    self->state.writer = writer;
    self->state.peer_replica = peer;
    self->state.snapshot_memory = memory;
    self->state.retry_min = retry.first;
    self->state.retry_max = retry.second;
    // The writer ends with its shard, however the shard ends.
    if (writer)
      self->attach_functor([writer](const caf::error&) {
        caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
      });
    // A restored shard has its checkpoint already; do not send it again.
    if (every > 0)
      self->state.last_snapshot_id = self->state.core.progress_clock() / every;
    if (writer)
      self->send(directory, supervision::watch_atom::value, std::string("checkpointer"));
    auto& cfg = self->state.core.config();
    self->state.links = link_ends(faults, to_string(actor_id::shard(cfg.shard)), "worker:", cfg.num_workers);
    return shard_behavior(self);
  });
}

}  // namespace keel
