#include "actors/parameter_shard.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>

#include <caf/all.hpp>

#include "actors/atoms.hpp"
#include "actors/crash.hpp"
#include "actors/shard_snapshot.hpp"

namespace keel {

namespace {

struct pending_pull {
  uint64_t clock;
  decoded<schema::PullRequest> request;
  caf::response_promise promise;
};

struct shard_state {
  shard_core core;
  std::deque<pending_pull> pulls;  // waiting for the consistency rule
  uint64_t snapshot_every = 0;
  uint64_t last_snapshot_id = 0;  // the restored or last sent checkpoint id
  caf::actor sink;
};

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

caf::expected<pull_reply_msg> answer(const shard_core& core, schema::PullRequest::Reader req) {
  frame_builder fb(core.dense().size() / 2 + 256);
  auto reply = fb.message().initRoot<schema::PullReply>();
  reply.setVersion(schema::PROTOCOL_VERSION);
  if (auto err = core.read(req, reply))
    return err;
  return pull_reply_msg(fb.finish());
}

push_ack_msg make_ack(schema::Push::Reader p, const push_outcome& o, uint64_t version, uint32_t shard) {
  return build<schema::PushAck>(32 + o.reason.size() / 8, [&](schema::PushAck::Builder b) {
    b.setWorker(p.getWorker());
    b.setSeq(p.getSeq());
    b.setShard(shard);
    b.setShardVersion(version);
    b.setStatus(o.status);
    b.setReason(o.reason);
    b.setExpectedSeq(o.expected_seq);
  });
}

using shard_actor = caf::stateful_actor<shard_state>;

// Serves every held pull that the rule now allows, in arrival order.
void serve_pulls(shard_actor* self) {
  auto& st = self->state;
  for (auto it = st.pulls.begin(); it != st.pulls.end();) {
    if (!st.core.can_serve(it->clock)) {
      ++it;
      continue;
    }
    auto reply = answer(st.core, it->request.root());
    if (reply)
      it->promise.deliver(std::move(*reply));
    else
      it->promise.deliver(reply.error());
    it = st.pulls.erase(it);
  }
}

// Sends a snapshot whenever the progress clock enters a new multiple of
// snapshot_every. Under BSP that is exactly the step boundary, so every
// shard of a checkpoint holds the same step.
void maybe_snapshot(shard_actor* self) {
  auto& st = self->state;
  if (st.snapshot_every == 0 || !st.sink)
    return;
  auto id = st.core.progress_clock() / st.snapshot_every;
  if (id <= st.last_snapshot_id)
    return;
  st.last_snapshot_id = id;
  auto snap = snapshot_of(st.core, id, now_unix_ms());
  if (snap)
    self->send(st.sink, std::move(*snap));
}

caf::behavior shard_behavior(shard_actor* self) {
  return {
    [](crash_atom) { throw std::runtime_error("injected exception"); },
    [self](const push_msg& m) -> caf::result<push_ack_msg> {
      auto push = decode(m);
      if (!push)
        return push.error();
      auto& st = self->state;
      auto root = push->root();
      auto o = st.core.offer(std::move(*push));
      auto ack = make_ack(root, o, st.core.version(), st.core.config().shard);
      if (o.status == schema::PushAck::Status::APPLIED || o.steps_applied > 0) {
        maybe_snapshot(self);
        serve_pulls(self);
      }
      return ack;
    },
    [self](const pull_request_msg& m) -> caf::result<pull_reply_msg> {
      auto req = decode(m);
      if (!req)
        return req.error();
      auto& st = self->state;
      auto clock = req->root().getClock();
      if (st.core.can_serve(clock))
        return answer(st.core, req->root());
      auto promise = self->make_response_promise<pull_reply_msg>();
      st.pulls.push_back({clock, std::move(*req), promise});
      return promise;
    },
    [self](const snapshot_request_msg& m) -> caf::result<shard_snapshot_msg> {
      auto req = decode(m);
      if (!req)
        return req.error();
      return snapshot_of(self->state.core, req->root().getCheckpoint(), now_unix_ms());
    },
    [self](status_atom, uint32_t worker) -> caf::result<uint64_t, uint64_t, uint64_t> {
      auto& core = self->state.core;
      if (worker >= core.config().num_workers)
        return make_error(errc::invalid_argument, "worker " + std::to_string(worker) +
                                                    " is not one of this job's workers");
      return {core.received(worker), core.applied(worker), core.bsp_clock()};
    },
    [self](params_atom) -> caf::result<shard_snapshot_msg> {
      return snapshot_of(self->state.core, 0, now_unix_ms());
    },
  };
}

}  // namespace

caf::expected<caf::actor> spawn_parameter_shard(caf::actor_system& sys, shard_options opts) {
  std::optional<shard_core> core;
  if (opts.snapshot) {
    auto snap = decode<schema::ShardSnapshot>(opts.snapshot);
    if (!snap)
      return snap.error();
    auto restored = restore_shard(opts.config, snap->root());
    if (!restored)
      return restored.error();
    core.emplace(std::move(*restored));
  } else {
    if (opts.initial_dense.size() != opts.config.dense.size())
      return make_error(errc::invalid_argument,
                        "shard " + std::to_string(opts.config.shard) + ": " +
                          std::to_string(opts.initial_dense.size()) + " initial values for " +
                          std::to_string(opts.config.dense.size()) + " dense keys");
    core.emplace(opts.config, std::move(opts.initial_dense));
  }
  auto every = opts.snapshot_every_steps;
  auto sink = opts.sink;
  return sys.spawn([c = std::make_shared<shard_core>(std::move(*core)), every, sink](shard_actor* self) mutable {
    self->state.core = std::move(*c);
    self->set_exception_handler(exception_as_error);
    self->state.snapshot_every = every;
    // A restored shard has its checkpoint already; do not send it again.
    if (every > 0)
      self->state.last_snapshot_id = self->state.core.progress_clock() / every;
    self->state.sink = sink;
    return shard_behavior(self);
  });
}

}  // namespace keel
