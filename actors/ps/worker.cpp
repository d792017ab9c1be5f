// The worker actor (worker.hpp): the training loop (start a step, pull from
// every shard, compute the gradient, push each shard its part, count the
// acks, report the step) and the behaviour that drives it. The decisions
// are worker_core's; recovery is in worker_recovery.cpp. Directory updates
// arrive through link_ends (actors/faults/link_ends.hpp), where the job's
// link faults act on them; the shards' links are faulted at the shards.
#include "actors/ps/worker.hpp"

#include <algorithm>

#include "actors/core/actor_id.hpp"
#include "actors/core/atoms.hpp"
#include "actors/core/client_channel.hpp"
#include "actors/core/crash.hpp"
#include "actors/core/job_event.hpp"
#include "actors/core/retry_backoff.hpp"
#include "actors/ps/worker_state.hpp"
#include "supervision/directory.hpp"
#include "supervision/protocol.hpp"

namespace keel::worker_detail {

void emit(worker_actor* self, job_event e) {
  auto& st = self->state;
  e.actor = to_string(actor_id::worker(st.cfg.core.worker));
  if (st.cfg.job)
    self->send(st.cfg.job, std::move(e));
}

void emit(worker_actor* self, event_kind kind, std::string detail) {
  emit(self, make_job_event(kind, {}, std::move(detail)));
}

std::chrono::milliseconds backoff(const worker_config& o, uint32_t attempt) {
  return retry_backoff(o.retry_min, o.retry_max, attempt);
}

void fail(worker_actor* self, caf::error err) {
  self->quit(std::move(err));
}

void on_pulled(worker_actor* self, uint32_t shard, schema::PullReply::Reader r);

// Starts the step in progress if the core lets it: builds its batch and asks
// every shard for what it needs.
void start_step(worker_actor* self) {
  auto& st = self->state;
  bool was_waiting = st.core.phase() == worker_phase::waiting;
  bool was_paused = st.core.paused();
  switch (st.core.next_step()) {
    case worker_core::step_start::finished:
      // Stay up with the log: a shard that restarts before the job has read
      // the final parameters still needs this worker's replay.
      if (st.env.channel)
        st.env.channel->finished(st.channel_token, st.core.step());
      self->send(st.cfg.job, done_atom::value, st.core.report());
      return;
    case worker_core::step_start::waiting:
      if (!was_waiting)
        st.waiting_since = std::chrono::steady_clock::now();
      return;  // until the job widens the window
    case worker_core::step_start::paused:
      if (!was_paused)
        emit_pause(self, true);
      return;  // until a checkpoint commits (truncate_atom)
    case worker_core::step_start::pull:
      break;
  }
  if (st.env.channel)
    return client_keys(self);  // the application names the step's keys
  auto es = st.core.position();
  batch_position at{st.cfg.seed,   es.epoch,           es.step,
                    st.cfg.core.worker, st.cfg.num_workers, st.cfg.batch_size};
  if (st.cfg.schedule.elastic())
    at = st.cfg.schedule.batch_at(st.cfg.seed, st.cfg.core.worker, st.core.step(), st.cfg.batch_size,
                                  st.env.training_model->num_train_examples());
  if (auto err = st.env.training_model->batch_indices(at, st.batch))
    return fail(self, err);
  if (auto err = st.env.training_model->sparse_keys(st.batch, *st.scratch, st.model_keys))
    return fail(self, err);
  if (auto err = st.env.training_model->table_keys(st.batch, *st.scratch, st.table_keys))
    return fail(self, err);
  st.core.begin_pull(st.model_keys, st.table_keys);
  pull_step(self);
}

void pull_step(worker_actor* self) {
  auto& st = self->state;
  // A shard whose early pull (ask_early_pulls) is answered, or still out,
  // is not asked again: its reply counts, or its failure asks then.
  std::vector<std::pair<uint32_t, pull_reply_msg>> answered;
  for (uint32_t i = 0; i < st.shards.size(); ++i) {
    auto& e = st.early[i];
    if (e.clock != st.core.step() || e.handle != st.shards[i]) {
      e = {};
      send_pull(self, i, 0);
    } else if (e.reply) {
      answered.emplace_back(i, std::move(*e.reply));
      e = {};
    }
  }
  for (auto& [i, m] : answered) {
    auto r = decode(m);
    if (!r)
      return fail(self, r.error());
    if (st.core.accepts_pull_reply(i, r->root().getClock()))
      on_pulled(self, i, r->root());
  }
}

void send_pull(worker_actor* self, uint32_t shard, uint32_t attempt) {
  auto& st = self->state;
  auto gen = st.core.generation();
  ask_shard<pull_reply_msg>(
      self, shard, st.core.pull_request(shard),
      [self, shard, gen](const pull_reply_msg& m) {
        if (!self->state.core.pull_open(gen, shard))
          return;
        auto r = decode(m);
        if (!r)
          return fail(self, r.error());
        on_pulled(self, shard, r->root());
      },
      [self, shard, gen, attempt](caf::error& err) {
        auto& st = self->state;
        if (!st.core.pull_open(gen, shard))
          return;
        st.core.count_retry();
        emit(self, event_kind::retry,
             "pull from " + st.cfg.core.shard_names[shard] + " at step " +
                 std::to_string(st.core.step()) + ": " + self->system().render(err));
        refresh(self, shard);
        self->delayed_send(self, backoff(st.cfg, attempt), retry_atom::value, gen, shard,
                           attempt + 1, false);
      });
}

// Under BSP a dense model's next pull is known before this step is done:
// asked right behind the step's push, a shard answers it as soon as it has
// applied the step, which saves the step's slowest worker a round trip
// (acks, then a pull) on every step. The reply is used once the next step
// starts pulling (start_step); a failed early pull is asked again normally
// if that step is waiting for it.
void ask_early_pulls(worker_actor* self) {
  auto& st = self->state;
  for (uint32_t i = 0; i < st.shards.size(); ++i) {
    auto req = st.core.early_pull_request(i);
    if (!req)
      return;
    auto clock = st.core.step() + 1;
    auto dest = st.shards[i];
    st.early[i] = {clock, dest, std::nullopt};
    ask_shard<pull_reply_msg>(
        self, i, *req,
        [self, i, clock, dest](const pull_reply_msg& m) {
          auto& st = self->state;
          auto& e = st.early[i];
          if (e.clock != clock || e.handle != dest)
            return;  // a newer step or shard incarnation asked since
          if (!st.core.accepts_pull_reply(i, clock)) {
            e.reply = m;  // the step has not started pulling yet
            return;
          }
          e = {};
          auto r = decode(m);
          if (!r)
            return fail(self, r.error());
          on_pulled(self, i, r->root());
        },
        [self, i, clock, dest](caf::error&) {
          auto& st = self->state;
          auto& e = st.early[i];
          if (e.clock != clock || e.handle != dest)
            return;
          e = {};
          if (st.core.accepts_pull_reply(i, clock))
            send_pull(self, i, 0);  // the step waits for it: ask the usual way
        });
  }
}

// Under combine mean with elastic workers (worker_config): the gradient
// times num_workers over the step's workers; nothing when they are equal.
void scale_to_step_workers(worker_state& st) {
  if (!st.cfg.mean_of_step_workers || !st.cfg.schedule.elastic())
    return;
  auto n = st.cfg.schedule.count(st.core.step());
  if (n == 0 || n == st.cfg.num_workers)
    return;
  const float f = static_cast<float>(st.cfg.num_workers) / static_cast<float>(n);
  for (auto& g : st.grad.dense) g *= f;
  for (auto& g : st.grad.sparse_values) g *= f;
  for (auto& t : st.grad.tables)
    for (auto& g : t.rows) g *= f;
}

// Every shard has answered: compute the gradient and push each shard its part.
void compute_and_push(worker_actor* self) {
  auto& st = self->state;
  if (st.env.channel)
    return client_gradient(self);  // the application computes it
  if (auto err =
          st.env.training_model->gradient(st.batch, st.core.parameters(), *st.scratch, st.grad))
    return fail(self, err);
  push_gradient(self);
}

void push_gradient(worker_actor* self) {
  auto& st = self->state;
  scale_to_step_workers(st);
  auto round = st.core.begin_push(st.grad);
  if (round.skipped) {
    auto step = st.core.step();
    auto e = make_job_event(event_kind::skipped_step, {},
                            "gradient of step " + std::to_string(step) + " is not finite");
    e.step = step;
    emit(self, std::move(e));
  }
  for (uint32_t i = 0; i < round.pushes.size(); ++i) send_push(self, i, round.pushes[i], 0);
  ask_early_pulls(self);
}

void on_pulled(worker_actor* self, uint32_t shard, schema::PullReply::Reader r) {
  auto all = self->state.core.pulled(shard, r);
  if (!all)
    return fail(self, all.error());
  if (*all)
    compute_and_push(self);
}

// The step is complete: tell the job, go on.
void step_done(worker_actor* self) {
  auto& st = self->state;
  if (st.env.channel)
    st.env.channel->completed(st.channel_token, st.core.step());
  self->send(st.cfg.job, step_report{st.cfg.core.epoch, st.cfg.core.worker, st.core.step(),
                                     st.core.report().last_loss});
  start_step(self);
}

void on_ack(worker_actor* self, uint32_t shard, schema::PushAck::Reader a) {
  auto& st = self->state;
  auto out = st.core.acked(shard, a);
  if (!out)
    return fail(self, out.error());
  if (out->rollback)
    return ask_for_rollback(self, *out->rollback);
  for (auto& m : out->resend) send_push(self, shard, m, 0);
  if (out->step_complete)
    step_done(self);
}

// A shard's directory entry, from a watch or a lookup.
void on_update(worker_actor* self, const supervision::directory_update& u) {
  auto& st = self->state;
  auto it = std::find(st.cfg.core.shard_names.begin(), st.cfg.core.shard_names.end(), u.name);
  if (it == st.cfg.core.shard_names.end() || u.state != supervision::name_state::up)
    return;
  auto shard = static_cast<uint32_t>(it - st.cfg.core.shard_names.begin());
  // A restarted supervisor numbers its children's incarnations afresh,
  // so a new handle, not a higher number, marks a new incarnation.
  if (u.handle == st.shards[shard])
    return;
  if (st.shards[shard])
    st.replaced[shard] = st.shards[shard];
  st.shards[shard] = u.handle;
  switch (st.core.shard_up(shard, u.incarnation)) {
    case worker_core::shard_action::resume:
      return resume(self);
    case worker_core::shard_action::ask_status:
      return ask_status(self, shard, 0);
    case worker_core::shard_action::replay:
      return replay_to(self, shard, 0);
    case worker_core::shard_action::none:
      return;
  }
}

// Looks a shard up in the directory. Watch updates can be lost or arrive out
// of order; a failed request or the periodic refresh finds the current
// incarnation anyway.
void refresh(worker_actor* self, uint32_t shard) {
  auto& st = self->state;
  self->request(st.cfg.directory, st.cfg.request_timeout, supervision::lookup_atom::value,
                st.cfg.core.shard_names[shard])
      .then([self](const supervision::directory_update& u) { on_update(self, u); },
            [](caf::error&) {});  // restarting or gone: the watch or the next refresh tells
}

void send_push(worker_actor* self, uint32_t shard, const push_msg& m, uint32_t attempt) {
  auto& st = self->state;
  auto gen = st.core.generation();
  ask_shard<push_ack_msg>(
      self, shard, m,
      [self, shard](const push_ack_msg& ack) {
        if (self->state.core.phase() == worker_phase::halted)
          return;
        auto a = decode(ack);
        if (!a)
          return fail(self, a.error());
        on_ack(self, shard, a->root());
      },
      [self, shard, gen, attempt, m, dest = st.shards[shard]](caf::error& err) {
        auto& st = self->state;
        auto seq = st.core.step() + 1;
        if (!st.core.push_open(gen, shard)) {
          // Not the open step's push: a replay to a restarted shard or a
          // resend after OUT_OF_ORDER, which the retry timer below never
          // covers. A lost one would leave the shard without it for good
          // (under BSP every later pull waits on it), so it goes again
          // while the shard is the incarnation it was sent to (a newer
          // one gets a replay of its own).
          if (st.core.phase() == worker_phase::halted || dest != st.shards[shard])
            return;
          auto d = decode(m);
          if (!d)
            return;
          st.core.count_retry();
          emit(self, event_kind::retry,
               "push " + std::to_string(d->root().getSeq()) + " to " + st.cfg.core.shard_names[shard] +
                   " (resent): " + self->system().render(err));
          refresh(self, shard);
          self->delayed_send(self, backoff(st.cfg, attempt), resend_atom::value, shard, m,
                             attempt + 1);
          return;
        }
        st.core.count_retry();
        emit(self, event_kind::retry,
             "push " + std::to_string(seq) + " to " + st.cfg.core.shard_names[shard] + ": " +
                 self->system().render(err));
        refresh(self, shard);
        self->delayed_send(self, backoff(st.cfg, attempt), retry_atom::value, gen, shard,
                           attempt + 1, true);
      });
}

}  // namespace keel::worker_detail

namespace keel {

using namespace worker_detail;

namespace {

// A retry timer went off: the core says what, if anything, is still to ask.
void on_retry(worker_actor* self, uint64_t gen, uint32_t shard, uint32_t attempt, bool push) {
  auto& core = self->state.core;
  switch (core.retry(gen, shard, push)) {
    case worker_core::retry_action::pull:
      return send_pull(self, shard, attempt);
    case worker_core::retry_action::status:
      return ask_status(self, shard, attempt);
    case worker_core::retry_action::push:
      for (auto& m : core.unacked(shard)) send_push(self, shard, m, attempt);
      return;
    case worker_core::retry_action::none:
      return;
  }
}

caf::behavior running(worker_actor* self) {
  return {
      [self](retry_atom, uint64_t gen, uint32_t shard, uint32_t attempt, bool push) {
        on_retry(self, gen, shard, attempt, push);
      },
      [self](resend_atom, uint32_t shard, const push_msg& m, uint32_t attempt) {
        auto& st = self->state;
        if (st.core.phase() != worker_phase::halted && shard < st.shards.size())
          send_push(self, shard, m, attempt);
      },
      [self](const supervision::directory_update& u) {
        self->state.links.receive(self, "directory", msg_kind::update,
                                  [self, u] { on_update(self, u); });
      },
      [self](deadline_atom) { expire_due(self, self->state.deadlines); },
      [self](refresh_atom) {
        auto& st = self->state;
        for (uint32_t i = 0; i < st.shards.size(); ++i) refresh(self, i);
        self->delayed_send(self, st.cfg.request_timeout, refresh_atom::value);
      },
      // An answer that arrives as a plain message rather than as the
      // response to a request: acks are idempotent; a pull reply counts
      // only while that pull is still open.
      [self](const push_ack_msg& m) {
        auto a = decode(m);
        if (!a || self->state.core.phase() == worker_phase::halted)
          return;
        on_ack(self, a->root().getShard(), a->root());  // the core checks the shard
      },
      [self](const pull_reply_msg& m) {
        auto r = decode(m);
        if (!r)
          return;
        auto shard = r->root().getShard();
        if (self->state.core.accepts_pull_reply(shard, r->root().getClock()))
          on_pulled(self, shard, r->root());
      },
      [self](truncate_atom, uint32_t shard, uint64_t covered) {
        auto& core = self->state.core;
        if (core.checkpoint_committed(shard, covered)) {
          step_done(self);
        } else if (core.release_backpressure()) {
          emit_pause(self, false);
          start_step(self);
        }
      },
      [self](replay_atom, uint32_t shard, uint32_t attempt) { replay_to(self, shard, attempt); },
      [self](window_atom, uint64_t limit) { on_window(self, limit); },
      [self](workers_changed_atom, const worker_schedule& workers) { return take_workers(self, workers); },
      [self](score_atom, slice_task& t) { return score_slice(self, std::move(t)); },
      [self](client_wake_atom) { client_wake(self); },
      [self](link_release_atom, uint64_t id) { self->state.links.release(id); },
      [](crash_atom) { throw std::runtime_error("injected exception"); },
  };
}

}  // namespace

caf::expected<caf::actor> spawn_worker(caf::actor_system& sys, worker_config cfg, worker_env env) {
  auto& core = cfg.core;
  if (!env.training_model)
    return make_error(errc::invalid_argument,
                      "worker " + std::to_string(core.worker) + ": no model");
  if (core.parts.size() != core.shard_names.size() || core.parts.empty())
    return make_error(errc::invalid_argument, "worker " + std::to_string(core.worker) +
                                                  ": shard names and key ranges disagree");
  auto& m = *env.training_model;
  auto spe = steps_per_epoch(m.num_train_examples(), cfg.num_workers, cfg.batch_size);
  if (spe == 0)
    return make_error(errc::invalid_argument,
                      "batch size " + std::to_string(cfg.batch_size) + " with " +
                          std::to_string(cfg.num_workers) + " workers leaves no full batch in " +
                          std::to_string(m.num_train_examples()) + " examples");
  core.dense_size = m.layout().dense_size();
  core.steps_per_epoch = spe;
  // An elastic worker's last step is the one before it leaves; it starts
  // where the shards say, which is no earlier than its join (they hold its
  // seqs from there: shard_core's spans).
  if (cfg.schedule.elastic())
    core.total_steps = std::min(core.total_steps, cfg.schedule.span(core.worker).end);
  core.dense_only = m.layout().sparse_key_count() == 0 && m.layout().tables().empty();
  core.table_dims.clear();
  for (auto& t : m.layout().tables()) core.table_dims.push_back(t.dim);
  return sys.spawn([cfg = std::move(cfg), env = std::move(env)](worker_actor* self) -> caf::behavior {
    auto& st = self->state;
    st.cfg = cfg;
    st.env = env;
    st.core = worker_core(cfg.core);
    auto shards = cfg.core.parts.size();
    st.early.resize(shards);
    st.scratch = env.training_model->make_scratch();
    st.shards.resize(shards);
    st.replaced.resize(shards);
    st.links = link_ends(env.faults, to_string(actor_id::worker(cfg.core.worker)));
    self->set_exception_handler(exception_as_error);
    if (env.channel)
      attach_client(self);
    // The directory answers each watch with the name's current entry, then
    // with every change; resolving ends when every shard is known.
    for (auto& name : cfg.core.shard_names)
      self->send(cfg.directory, supervision::watch_atom::value, name);
    self->delayed_send(self, cfg.request_timeout, refresh_atom::value);
    return running(self);
  });
}

}  // namespace keel
