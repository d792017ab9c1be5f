#include "actors/worker.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "actors/atoms.hpp"
#include "actors/crash.hpp"
#include "actors/job_event.hpp"
#include "actors/faults/link_hold.hpp"
#include "actors/worker_state.hpp"
#include "supervision/directory.hpp"
#include "supervision/protocol.hpp"

namespace keel::worker_detail {

void emit(worker_actor* self, job_event e) {
  auto& st = self->state;
  e.actor = "worker:" + std::to_string(st.opt.worker);
  if (st.opt.job)
    self->send(st.opt.job, std::move(e));
}

void emit(worker_actor* self, event_kind kind, std::string detail) {
  emit(self, make_job_event(kind, {}, std::move(detail)));
}

std::chrono::milliseconds backoff(const worker_options& o, uint32_t attempt) {
  auto d = o.retry_min * (1u << std::min<uint32_t>(attempt, 16));
  return std::min(d, o.retry_max);
}

void fail(worker_actor* self, caf::error err) {
  self->quit(std::move(err));
}

// Builds the step's batch and asks every shard for what it needs.
void start_step(worker_actor* self) {
  auto& st = self->state;
  if (st.step >= st.opt.total_steps) {
    st.now = phase::finished;
    st.report.steps = st.step;
    st.report.pushes_acked = 0;
    for (auto a : st.max_acked) st.report.pushes_acked += a;
    st.report.epoch = st.opt.epoch;
    self->send(st.opt.job, done_atom::value, st.report);
    // Stay up with the log: a shard that restarts before the job has read
    // the final parameters still needs this worker's replay.
    return;
  }
  if (st.opt.windowed && st.step >= st.window) {
    st.now = phase::waiting;  // until the job widens the window
    return;
  }
  auto es = split_global_step(st.step, st.steps_per_epoch);
  batch_position at{st.opt.seed,   es.epoch,           es.step,
                    st.opt.worker, st.opt.num_workers, st.opt.batch_size};
  if (auto err = st.opt.training_model->batch_indices(at, st.batch))
    return fail(self, err);
  if (auto err = st.opt.training_model->sparse_keys(st.batch, *st.scratch, st.model_keys))
    return fail(self, err);
  auto dense_size = st.opt.training_model->layout().dense_size();
  st.sparse_values.resize(st.model_keys.size());
  for (auto& k : st.shard_keys) k.clear();
  for (auto k : st.model_keys)
    st.shard_keys[shard_of(st.opt.parts, dense_size + k)].push_back(dense_size + k);
  st.now = phase::pulling;
  ++st.generation;
  std::fill(st.done.begin(), st.done.end(), false);
  st.pending = st.shards.size();
  for (uint32_t i = 0; i < st.shards.size(); ++i) send_pull(self, i, 0);
}

pull_request_msg make_pull(const worker_state& st, uint32_t shard) {
  auto& keys = st.shard_keys[shard];
  auto range = st.opt.parts[shard].dense;
  return build<schema::PullRequest>(64 + keys.size(), [&](schema::PullRequest::Builder b) {
    b.setWorker(st.opt.worker);
    b.setShard(shard);
    b.setClock(st.step);
    if (range.size() > 0) {
      auto d = b.initDense(1);
      d[0].setBegin(range.begin);
      d[0].setEnd(range.end);
    }
    auto k = b.initSparseKeys(keys.size());
    for (unsigned i = 0; i < keys.size(); ++i) k.set(i, keys[i]);
  });
}

void on_pulled(worker_actor* self, uint32_t shard, schema::PullReply::Reader r);
void compute_and_push(worker_actor* self);

void send_pull(worker_actor* self, uint32_t shard, uint32_t attempt) {
  auto& st = self->state;
  auto gen = st.generation;
  self->request(st.shards[shard], st.opt.request_timeout, make_pull(st, shard))
        .then(
            [self, shard, gen](const pull_reply_msg& m) {
              auto& st = self->state;
              if (gen != st.generation || st.now != phase::pulling || st.done[shard])
                return;
              auto r = decode(m);
              if (!r)
                return fail(self, r.error());
              on_pulled(self, shard, r->root());
            },
            [self, shard, gen, attempt](caf::error& err) {
              auto& st = self->state;
              if (gen != st.generation || st.now != phase::pulling || st.done[shard])
                return;
              ++st.report.retries;
              emit(self, event_kind::retry,
                   "pull from " + st.opt.shard_names[shard] + " at step " +
                       std::to_string(st.step) + ": " + self->system().render(err));
              refresh(self, shard);
              self->delayed_send(self, backoff(st.opt, attempt), retry_atom::value, gen, shard,
                                 attempt + 1, false);
            });
}

void on_pulled(worker_actor* self, uint32_t shard, schema::PullReply::Reader r) {
  auto& st = self->state;
  auto range = st.opt.parts[shard].dense;
  for (auto d : r.getDense()) {
    auto v = d.getValues();
    if (d.getBegin() < range.begin || d.getEnd() > range.end)
      return fail(self,
                  make_error(errc::invalid_field, "pull reply from shard " + std::to_string(shard) +
                                                      " holds keys outside its range"));
    std::memcpy(st.dense.data() + d.getBegin(), v.begin(), v.size());
  }
  // Sparse values land in model-key order: shards own ascending key slices.
  auto keys = st.shard_keys[shard];
  auto vals = r.getSparse().getValues();
  if (vals.size() != keys.size())
    return fail(self, make_error(errc::invalid_field,
                                 "pull reply from shard " + std::to_string(shard) + " has " +
                                     std::to_string(vals.size()) + " sparse values for " +
                                     std::to_string(keys.size()) + " keys"));
  size_t offset = 0;
  for (uint32_t i = 0; i < shard; ++i) offset += st.shard_keys[i].size();
  for (unsigned i = 0; i < vals.size(); ++i) st.sparse_values[offset + i] = vals[i];
  st.done[shard] = true;
  if (--st.pending == 0)
    compute_and_push(self);
}

bool all_finite(const gradient_buffer& g) {
  for (auto v : g.dense)
    if (!std::isfinite(v))
      return false;
  for (auto v : g.sparse_values)
    if (!std::isfinite(v))
      return false;
  return true;
}

push_msg make_push(const worker_state& st, uint32_t shard, bool empty) {
  auto range = st.opt.parts[shard].dense;
  auto& keys = st.shard_keys[shard];
  size_t offset = 0;
  for (uint32_t i = 0; i < shard; ++i) offset += st.shard_keys[i].size();
  return build<schema::Push>(64 + range.size() / 2 + keys.size() * 2, [&](schema::Push::Builder b) {
    b.setWorker(st.opt.worker);
    b.setSeq(st.step + 1);
    b.setStep(st.step);
    b.setShard(shard);
    if (empty)
      return;
    if (range.size() > 0) {
      auto d = b.initDense(1)[0];
      d.setBegin(range.begin);
      d.setEnd(range.end);
      std::memcpy(d.initValues(range.size() * 4).begin(), st.grad.dense.data() + range.begin,
                  range.size() * 4);
    }
    auto s = b.initSparse();
    auto k = s.initKeys(keys.size());
    auto v = s.initValues(keys.size());
    for (unsigned i = 0; i < keys.size(); ++i) {
      k.set(i, keys[i]);
      v.set(i, st.grad.sparse_values[offset + i]);
    }
  });
}

void compute_and_push(worker_actor* self) {
  auto& st = self->state;
  parameter_view view{st.dense, st.model_keys,
                      span<const float>(st.sparse_values.data(), st.model_keys.size())};
  if (auto err = st.opt.training_model->gradient(st.batch, view, *st.scratch, st.grad))
    return fail(self, err);
  bool skip = !all_finite(st.grad);
  if (skip) {
    ++st.report.skipped_steps;
    auto e = make_job_event(event_kind::skipped_step, {},
                            "gradient of step " + std::to_string(st.step) + " is not finite");
    e.step = st.step;
    emit(self, std::move(e));
  } else {
    st.report.last_loss = st.grad.loss;
  }
  st.now = phase::pushing;
  ++st.generation;
  std::fill(st.done.begin(), st.done.end(), false);
  st.pending = st.shards.size();
  for (uint32_t i = 0; i < st.shards.size(); ++i) {
    auto m = make_push(st, i, skip);
    st.log.append(i, st.step + 1, m);
    send_push(self, i, m, 0);
  }
}

void step_pushed(worker_actor* self, uint32_t shard);

void on_ack(worker_actor* self, uint32_t shard, schema::PushAck::Reader a) {
  auto& st = self->state;
  switch (a.getStatus()) {
    case Status::APPLIED:
    case Status::ACCEPTED:
    case Status::DUPLICATE:
      st.max_acked[shard] = std::max(st.max_acked[shard], a.getSeq());
      break;
    case Status::OUT_OF_ORDER: {
      auto expected = a.getExpectedSeq();
      auto first = st.log.first_seq(shard);
      uint64_t last_sent = st.step + (st.now == phase::pushing ? 1 : 0);
      if (expected > last_sent)
        return;  // the shard is only waiting for what this worker sends next
      if (first == 0 || expected < first) {
        halt_for_rollback(self, st.opt.shard_names[shard] + " needs push " +
                                    std::to_string(expected) + " of worker " +
                                    std::to_string(st.opt.worker) +
                                    ", which its log no longer holds");
        return;
      }
      for (auto& m : st.log.after(shard, expected - 1)) send_push(self, shard, m, 0);
      return;
    }
    case Status::REJECTED:
      return fail(self, make_error(errc::invalid_field,
                                   st.opt.shard_names[shard] + " rejected push " +
                                       std::to_string(a.getSeq()) + ": " + a.getReason().cStr()));
  }
  if (a.getSeq() == st.step + 1)
    step_pushed(self, shard);
}

// The current step's push to `shard` is known applied: acknowledged, or
// covered by a committed checkpoint (its ack may have been lost).
void step_pushed(worker_actor* self, uint32_t shard) {
  auto& st = self->state;
  if (st.now != phase::pushing || st.done[shard])
    return;
  st.done[shard] = true;
  if (--st.pending == 0) {
    ++st.step;
    self->send(st.opt.job, step_atom::value, st.opt.epoch, st.opt.worker, st.step,
               st.report.last_loss);
    start_step(self);
  }
}

// A shard's directory entry, from a watch or a lookup.
void on_update(worker_actor* self, const supervision::directory_update& u) {
  auto& st = self->state;
  auto it = std::find(st.opt.shard_names.begin(), st.opt.shard_names.end(), u.name);
  if (it == st.opt.shard_names.end() || u.state != supervision::name_state::up)
    return;
  auto shard = static_cast<uint32_t>(it - st.opt.shard_names.begin());
  // A restarted supervisor numbers its children's incarnations afresh,
  // so a new handle, not a higher number, marks a new incarnation.
  if (u.handle == st.shards[shard])
    return;
  bool first = st.incarnation[shard] == 0;
  st.shards[shard] = u.handle;
  st.incarnation[shard] = std::max<uint64_t>(u.incarnation, 1);
  if (st.now == phase::resolving) {
    if (std::all_of(st.incarnation.begin(), st.incarnation.end(), [](uint64_t i) { return i > 0; }))
      resume(self);
  } else if (st.now == phase::resuming && !first && !st.done[shard]) {
    ask_status(self, shard, 0);
  } else if (st.now != phase::resolving && st.now != phase::halted) {
    replay_to(self, shard, 0);
  }
}

// Looks a shard up in the directory. Watch updates can be lost or arrive out
// of order; a failed request or the periodic refresh finds the current
// incarnation anyway.
void refresh(worker_actor* self, uint32_t shard) {
  auto& st = self->state;
  self->request(st.opt.directory, st.opt.request_timeout, supervision::lookup_atom::value,
                st.opt.shard_names[shard])
      .then([self](const supervision::directory_update& u) { on_update(self, u); },
            [](caf::error&) {});  // restarting or gone: the watch or the next refresh tells
}

void send_push(worker_actor* self, uint32_t shard, const push_msg& m, uint32_t attempt) {
  auto& st = self->state;
  auto gen = st.generation;
  self->request(st.shards[shard], st.opt.request_timeout, m)
        .then(
            [self, shard](const push_ack_msg& ack) {
              auto& st = self->state;
              if (st.now == phase::halted)
                return;
              auto a = decode(ack);
              if (!a)
                return fail(self, a.error());
              on_ack(self, shard, a->root());
            },
            [self, shard, gen, attempt](caf::error& err) {
              auto& st = self->state;
              auto seq = st.step + 1;
              if (gen != st.generation || st.now != phase::pushing || st.done[shard])
                return;
              ++st.report.retries;
              emit(self, event_kind::retry,
                   "push " + std::to_string(seq) + " to " + st.opt.shard_names[shard] + ": " +
                       self->system().render(err));
              refresh(self, shard);
              self->delayed_send(self, backoff(st.opt, attempt), retry_atom::value, gen, shard,
                                 attempt + 1, true);
            });
}

}  // namespace keel::worker_detail

namespace keel {

using namespace worker_detail;

namespace {

caf::behavior running(worker_actor* self) {
  return {
      [](crash_atom) { throw std::runtime_error("injected exception"); },
      [self](retry_atom, uint64_t gen, uint32_t shard, uint32_t attempt, bool push) {
        auto& st = self->state;
        if (gen != st.generation || st.done[shard])
          return;
        if (!push && st.now == phase::pulling)
          send_pull(self, shard, attempt);
        else if (!push && st.now == phase::resuming)
          ask_status(self, shard, attempt);
        else if (push && st.now == phase::pushing)
          for (auto& m : st.log.after(shard, st.step)) send_push(self, shard, m, attempt);
      },
      [self](const supervision::directory_update& u) {
        // Updates cross the directory's link to this worker.
        auto& st = self->state;
        auto me = "worker:" + std::to_string(st.opt.worker);
        auto d = st.opt.faults ? st.opt.faults->on_message("directory", me, msg_kind::update)
                               : send_decision{};
        st.held.apply(self, d, "directory>" + me, [self, u] { on_update(self, u); });
      },
      [self](link_release_atom, uint64_t id) { self->state.held.release(id); },
      [self](refresh_atom) {
        auto& st = self->state;
        for (uint32_t i = 0; i < st.shards.size(); ++i) refresh(self, i);
        self->delayed_send(self, st.opt.request_timeout, refresh_atom::value);
      },
      // A second copy of an answer (a duplicating link): acks are idempotent;
      // a pull reply counts only while that pull is still open.
      [self](const push_ack_msg& m) {
        auto& st = self->state;
        auto a = decode(m);
        if (!a || st.now == phase::halted || a->root().getShard() >= st.shards.size())
          return;
        on_ack(self, a->root().getShard(), a->root());
      },
      [self](const pull_reply_msg& m) {
        auto& st = self->state;
        auto r = decode(m);
        if (!r || st.now != phase::pulling)
          return;
        auto shard = r->root().getShard();
        if (shard < st.shards.size() && !st.done[shard] && r->root().getClock() == st.step)
          on_pulled(self, shard, r->root());
      },
      [self](truncate_atom, uint32_t shard, uint64_t covered) {
        auto& st = self->state;
        st.log.truncate(shard, covered);
        // A checkpoint holding this step's push means the shard applied it,
        // even if its ack never arrived; the log no longer holds it to resend.
        if (shard < st.shards.size() && st.now == phase::pushing && covered >= st.step + 1) {
          st.max_acked[shard] = std::max(st.max_acked[shard], st.step + 1);
          step_pushed(self, shard);
        }
      },
      [self](replay_atom, uint32_t shard, uint32_t attempt) { replay_to(self, shard, attempt); },
      [self](window_atom, uint64_t limit) {
        auto& st = self->state;
        st.window = std::max(st.window, limit);
        if (st.now == phase::waiting && st.step < st.window)
          start_step(self);
      },
  };
}

}  // namespace

caf::expected<caf::actor> spawn_worker(caf::actor_system& sys, worker_options opts) {
  if (!opts.training_model)
    return make_error(errc::invalid_argument,
                      "worker " + std::to_string(opts.worker) + ": no model");
  if (opts.parts.size() != opts.shard_names.size() || opts.parts.empty())
    return make_error(errc::invalid_argument, "worker " + std::to_string(opts.worker) +
                                                  ": shard names and key ranges disagree");
  auto spe =
      steps_per_epoch(opts.training_model->num_train_examples(), opts.num_workers, opts.batch_size);
  if (spe == 0)
    return make_error(errc::invalid_argument,
                      "batch size " + std::to_string(opts.batch_size) + " with " +
                          std::to_string(opts.num_workers) + " workers leaves no full batch in " +
                          std::to_string(opts.training_model->num_train_examples()) + " examples");
  return sys.spawn([opts = std::move(opts), spe](worker_actor* self) -> caf::behavior {
    auto& st = self->state;
    st.opt = opts;
    st.steps_per_epoch = spe;
    auto n = static_cast<uint32_t>(opts.parts.size());
    st.scratch = opts.training_model->make_scratch();
    st.log = replay_log(n);
    st.shards.resize(n);
    st.incarnation.assign(n, 0);
    st.shard_keys.resize(n);
    st.done.assign(n, false);
    st.max_acked.assign(n, 0);
    st.resume_from.assign(n, 0);
    st.dense.assign(opts.training_model->layout().dense_size(), 0.0f);
    st.report.worker = opts.worker;
    self->set_exception_handler(exception_as_error);
    // The directory answers each watch with the name's current entry, then
    // with every change; resolving ends when every shard is known.
    for (auto& name : opts.shard_names)
      self->send(opts.directory, supervision::watch_atom::value, name);
    self->delayed_send(self, opts.request_timeout, refresh_atom::value);
    return running(self);
  });
}

}  // namespace keel
