#include "actors/ps/parameter_shard.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <vector>

#include <caf/all.hpp>

#include "actors/core/actor_id.hpp"
#include "actors/core/atoms.hpp"
#include "actors/core/crash.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/faults/link_hold.hpp"
#include "supervision/directory.hpp"
#include "supervision/protocol.hpp"

namespace keel {

namespace {

struct pending_pull {
  uint64_t clock;
  decoded<schema::PullRequest> request;
  caf::typed_response_promise<pull_reply_msg> promise;
  caf::actor requester;
};

// The last pull reply built and what it answered. Under BSP every worker
// pulls the same keys at the same clock once a step is applied; a reply is
// a function of (clock, keys, shard version) alone and frames are
// immutable, so the next worker gets the same frame, with no copy. The
// price: the last reply stays in memory until the next (at most one more
// copy of what a worker pulls, per shard).
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
  uint64_t last_snapshot_id = 0;  // the restored or last sent checkpoint id
  caf::actor checkpointer;        // its current incarnation (invalid while none is up)
  std::optional<shard_snapshot_msg> newest;  // the last periodic snapshot taken
  std::string name;  // "shard:N", this shard's end of its links
  std::shared_ptr<link_faults> faults;
  held_deliveries held;
};

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

caf::expected<pull_reply_msg> answer(shard_state& st, schema::PullRequest::Reader req) {
  if (st.replied.answers(req, st.core.version()))
    return *st.replied.reply;
  frame_builder fb(256 + req.getSparseKeys().size() * 2);
  auto reply = fb.message().initRoot<schema::PullReply>();
  reply.setVersion(schema::PROTOCOL_VERSION);
  if (auto err = st.core.read(req, reply, &fb))
    return err;
  pull_reply_msg out(fb.finish());
  st.replied.remember(req, st.core.version(), out);
  return out;
}

push_ack_msg make_ack(uint32_t worker, uint64_t seq, const push_outcome& o, uint64_t version,
                      uint32_t shard) {
  return build<schema::PushAck>(32 + o.reason.size() / 8, [&](schema::PushAck::Builder b) {
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

std::string worker_name(uint32_t worker) {
  return "worker:" + std::to_string(worker);
}

// Counts a message on a link and says what its armed faults do to it.
send_decision decide(shard_actor* self, const std::string& from, const std::string& to,
                     msg_kind kind) {
  auto& faults = self->state.faults;
  return faults ? faults->on_message(from, to, kind) : send_decision{};
}

// Answers a request from `worker` through this shard's link to it. A
// duplicated answer reaches the worker a second time as a plain message.
template <class T>
void answer_through(shard_actor* self, uint32_t worker, msg_kind kind,
                    caf::typed_response_promise<T> rp, T reply, caf::actor requester) {
  auto& st = self->state;
  auto to = worker_name(worker);
  st.held.apply(
    self, decide(self, st.name, to, kind), st.name + ">" + to,
    [rp, reply]() mutable { rp.deliver(reply); },
    [self, rp, reply, requester]() mutable {
      rp.deliver(reply);
      if (requester)
        self->send(requester, reply);
    });
}

// Serves every held pull that the rule now allows, in arrival order.
void serve_pulls(shard_actor* self) {
  auto& st = self->state;
  for (auto it = st.pulls.begin(); it != st.pulls.end();) {
    if (!st.core.can_serve(it->clock)) {
      ++it;
      continue;
    }
    auto reply = answer(st, it->request.root());
    auto worker = it->request.root().getWorker();
    if (reply)
      answer_through(self, worker, msg_kind::reply, it->promise, std::move(*reply), it->requester);
    else
      it->promise.deliver(reply.error());
    it = st.pulls.erase(it);
  }
}

// Sends a snapshot whenever the progress clock enters a new multiple of
// snapshot_every. Under BSP that is exactly the step boundary, so every
// shard of a checkpoint holds the same step.
// Sends the newest snapshot to the checkpointer through this shard's link to it.
void send_snapshot(shard_actor* self) {
  auto& st = self->state;
  if (!st.checkpointer || !st.newest)
    return;
  st.held.apply(self, decide(self, st.name, "checkpointer", msg_kind::snapshot),
                st.name + ">checkpointer",
                [self, to = st.checkpointer, m = *st.newest] { self->send(to, m); });
}

void maybe_snapshot(shard_actor* self) {
  auto& st = self->state;
  if (st.snapshot_every == 0)
    return;
  auto id = st.core.progress_clock() / st.snapshot_every;
  if (id <= st.last_snapshot_id)
    return;
  st.last_snapshot_id = id;
  auto snap = snapshot_of(st.core, id, now_unix_ms());
  if (!snap)
    return;
  st.newest = std::move(*snap);
  send_snapshot(self);
}

// The checkpointer's name changed hands: a new incarnation gets the newest
// snapshot again (its predecessor may have died before writing it).
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
  send_snapshot(self);
}

push_ack_msg apply_push(shard_actor* self, decoded<schema::Push> push) {
  auto& st = self->state;
  auto worker = push.root().getWorker();
  auto seq = push.root().getSeq();
  auto o = st.core.offer(std::move(push));
  auto ack = make_ack(worker, seq, o, st.core.version(), st.core.config().shard);
  if (o.status == schema::PushAck::Status::APPLIED || o.steps_applied > 0) {
    maybe_snapshot(self);
    serve_pulls(self);
  }
  return ack;
}

// A push that a link fault held back (or doubled) arrives now.
void late_push(shard_actor* self, const push_msg& m, caf::typed_response_promise<push_ack_msg>* rp,
               const caf::actor& requester) {
  auto push = decode(m);
  if (!push) {
    if (rp)
      rp->deliver(push.error());
    return;
  }
  auto worker = push->root().getWorker();
  auto ack = apply_push(self, std::move(*push));
  if (rp)
    answer_through(self, worker, msg_kind::ack, *rp, std::move(ack), requester);
}

void on_pull(shard_actor* self, decoded<schema::PullRequest> req,
             caf::typed_response_promise<pull_reply_msg> rp, const caf::actor& requester) {
  auto& st = self->state;
  auto clock = req.root().getClock();
  if (!st.core.can_serve(clock)) {
    st.pulls.push_back({clock, std::move(req), rp, requester});
    return;
  }
  auto reply = answer(st, req.root());
  if (!reply) {
    rp.deliver(reply.error());
    return;
  }
  answer_through(self, req.root().getWorker(), msg_kind::reply, rp, std::move(*reply), requester);
}

caf::behavior shard_behavior(shard_actor* self) {
  return {
    [](crash_atom) { throw std::runtime_error("injected exception"); },
    [self](link_release_atom, uint64_t id) { self->state.held.release(id); },
    [self](const push_msg& m) -> caf::result<push_ack_msg> {
      auto push = decode(m);
      if (!push)
        return push.error();
      auto& st = self->state;
      auto from = worker_name(push->root().getWorker());
      auto in = decide(self, from, st.name, msg_kind::push);
      auto rp = self->make_response_promise<push_ack_msg>();
      auto requester = caf::actor_cast<caf::actor>(self->current_sender());
      if (in.action == send_action::deliver) {
        auto worker = push->root().getWorker();
        auto ack = apply_push(self, std::move(*push));
        st.held.delivered(from + ">" + st.name);
        answer_through(self, worker, msg_kind::ack, rp, std::move(ack), requester);
        return rp;
      }
      st.held.apply(
        self, in, from + ">" + st.name,
        [self, m, rp, requester]() mutable { late_push(self, m, &rp, requester); },
        [self, m, rp, requester]() mutable {
          late_push(self, m, &rp, requester);
          late_push(self, m, nullptr, requester);  // the copy: the shard sees a duplicate
        });
      return rp;
    },
    [self](const pull_request_msg& m) -> caf::result<pull_reply_msg> {
      auto req = decode(m);
      if (!req)
        return req.error();
      auto& st = self->state;
      auto from = worker_name(req->root().getWorker());
      auto in = decide(self, from, st.name, msg_kind::pull);
      auto rp = self->make_response_promise<pull_reply_msg>();
      auto requester = caf::actor_cast<caf::actor>(self->current_sender());
      if (in.action == send_action::deliver) {
        on_pull(self, std::move(*req), rp, requester);
        st.held.delivered(from + ">" + st.name);
        return rp;
      }
      // A held pull is decoded again when it arrives; a doubled one is
      // answered once (CAF keeps one response per request).
      st.held.apply(self, in, from + ">" + st.name, [self, m, rp, requester]() mutable {
        auto again = decode(m);
        if (!again) {
          rp.deliver(again.error());
          return;
        }
        on_pull(self, std::move(*again), rp, requester);
      });
      return rp;
    },
    [self](const snapshot_request_msg& m) -> caf::result<shard_snapshot_msg> {
      auto req = decode(m);
      if (!req)
        return req.error();
      return snapshot_of(self->state.core, req->root().getCheckpoint(), now_unix_ms());
    },
    [self](status_atom, uint32_t worker) -> caf::result<uint64_t, uint64_t, uint64_t> {
      auto& st = self->state;
      if (worker >= st.core.config().num_workers)
        return make_error(errc::invalid_argument, "worker " + std::to_string(worker) +
                                                    " is not one of this job's workers");
      auto from = worker_name(worker);
      auto in = decide(self, from, st.name, msg_kind::status);
      auto rp = self->make_response_promise<uint64_t, uint64_t, uint64_t>();
      st.held.apply(self, in, from + ">" + st.name, [self, rp, worker]() mutable {
        auto& core = self->state.core;
        rp.deliver(core.received(worker), core.applied(worker), core.bsp_clock());
      });
      return rp;
    },
    [self](params_atom) -> caf::result<shard_snapshot_msg> {
      return snapshot_of(self->state.core, 0, now_unix_ms());
    },
    [self](const supervision::directory_update& u) { on_checkpointer(self, u); },
  };
}

}  // namespace

caf::expected<caf::actor> spawn_parameter_shard(caf::actor_system& sys, parameter_shard_config cfg,
                                                parameter_shard_env env) {
  std::optional<shard_core> core;
  if (!cfg.snapshot.empty()) {
    auto snap = decode(cfg.snapshot);
    if (!snap)
      return snap.error();
    auto restored = restore_shard(cfg.core, snap->root(),
                                  env.snapshot_crcs_checked ? verify_mode::structure : verify_mode::checksums);
    if (!restored)
      return restored.error();
    core.emplace(std::move(*restored));
  } else {
    auto fresh = shard_core::make(cfg.core, std::move(cfg.initial_dense));
    if (!fresh)
      return fresh.error();
    core.emplace(std::move(*fresh));
  }
  auto every = cfg.snapshot_every_steps;
  auto directory = cfg.directory;
  auto faults = env.faults;
  return sys.spawn([c = std::make_shared<shard_core>(std::move(*core)), every, directory,
                    faults](shard_actor* self) mutable {
    self->state.core = std::move(*c);
    self->set_exception_handler(exception_as_error);
    self->state.snapshot_every = every;
    // A restored shard has its checkpoint already; do not send it again.
    if (every > 0)
      self->state.last_snapshot_id = self->state.core.progress_clock() / every;
    if (every > 0 && directory)
      self->send(directory, supervision::watch_atom::value, std::string("checkpointer"));
    self->state.name = to_string(actor_id::shard(self->state.core.config().shard));
    self->state.faults = faults;
    return shard_behavior(self);
  });
}

}  // namespace keel
