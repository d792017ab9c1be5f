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
#include "actors/ps/shard_state.hpp"
#include "actors/ps/snapshot_replica.hpp"
#include "actors/ps/snapshot_writer.hpp"
#include "models/model.hpp"
#include "storage/store_layout.hpp"
#include "supervision/directory.hpp"
#include "supervision/protocol.hpp"

namespace keel {

namespace {

using namespace shard_detail;


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
    [self](workers_changed_atom, const worker_schedule& workers) -> caf::result<caf::ok_atom> {
      if (auto err = workers.check(self->state.core.config().num_workers))
        return err;
      self->state.core.change_workers(workers);
      return caf::ok_atom::value;
    },
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
  // A shard that streams all its snapshots builds none in memory: the
  // buffer its restore read its files into goes now, not with the shard.
  if (cfg.stream_above_bytes == 0 && !cfg.peer_replica)
    memory = snapshot_pool();
  auto directory = cfg.directory;
  auto faults = env.faults;
  auto epoch = cfg.epoch;
  run_identity run{cfg.run_id, cfg.config_hash, {}};
  auto writer = every > 0 && directory ? spawn_snapshot_writer(sys, cfg.checkpoint_dir, env.io) : caf::actor{};
  auto retry = std::make_pair(cfg.retry_min, cfg.retry_max);
  auto chain = cfg.chain;
  auto peer = cfg.peer_replica;
  auto io = env.io ? env.io : posix_io();
  auto files = std::make_pair(cfg.checkpoint_dir, cfg.stream_above_bytes);
  return sys.spawn([b = std::make_shared<shard_start>(std::move(*begun)), every, directory, faults, epoch, run,
                    writer, retry, memory, chain, peer, io, files](shard_actor* self) mutable {
    self->state.core = std::move(b->core);
    self->state.chain = snapshot_chain(chain);
    self->state.chain.restored(std::move(b->chain));
    self->state.epoch = epoch;
    self->state.run = run;
    self->set_exception_handler(exception_as_error);
    self->state.snapshot_every = every;
    self->state.writer = writer;
    self->state.peer_replica = peer;
    self->state.io = io;
    self->state.checkpoint_dir = files.first;
    self->state.stream_above = files.second;
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
