// The job controller's behaviour, top to bottom: how the run begins, what
// each message does, how the run ends (a result, a failure, a stop), and the
// waits of its transitions. The states and the protocol are in
// job_controller.hpp; the application's requests, the tree, recovery, the
// read-out and the fault hooks in job_requests.cpp, job_tree.cpp,
// job_recovery.cpp, job_result.cpp and job_faults.cpp.
#include "actors/job/job_controller.hpp"

#include <algorithm>

#include "actors/core/client_channel.hpp"
#include "actors/job/event_feed.hpp"
#include "actors/job/placement.hpp"
#include "actors/ps/checkpointer.hpp"
#include "actors/ps/snapshot_replica.hpp"
#include "messages/errors.hpp"
#include "supervision/directory.hpp"
#include "supervision/events.hpp"

namespace keel {

namespace {

event_kind folded(supervision::event_kind k) {
  switch (k) {
    case supervision::event_kind::start: return event_kind::start;
    case supervision::event_kind::down: return event_kind::down;
    case supervision::event_kind::restart: return event_kind::restart;
    case supervision::event_kind::escalate: return event_kind::escalate;
    case supervision::event_kind::shutdown: return event_kind::shutdown;
  }
  return event_kind::down;
}

job_event from_supervision(const supervision::event& e) {
  auto j = make_job_event(folded(e.kind), e.child, supervision::to_string(e));
  j.count = e.incarnation;
  if (e.from_snapshot)
    j.snapshot = e.snapshot_label;
  j.failed = e.kind == supervision::event_kind::down && static_cast<bool>(e.reason);
  return j;
}

// When the running job has gone without a step for its stall timeout.
std::optional<std::chrono::steady_clock::time_point> stall_deadline(const controller_state& st) {
  if (st.stall_timeout.count() <= 0 || !st.run.core.running())
    return std::nullopt;
  return st.progress.last_step_at + st.stall_timeout;
}

// A job that makes no progress fails, naming the workers it waits for:
// the slowest ones, each with its step and whether it runs now.
void watch_stall(controller_actor* self) {
  auto& st = self->state;
  auto due = stall_deadline(st);
  if (!due || std::chrono::steady_clock::now() < *due)
    return;
  auto& p = st.progress;
  auto slowest = p.slowest();
  std::string waiting;
  for (uint32_t w = 0; w < p.worker_step.size(); ++w) {
    if (p.worker_step[w] != slowest || p.done.count(w))
      continue;
    auto name = actor_id::worker(w);
    auto h = st.run.handles.find(name);
    waiting += (waiting.empty() ? "" : ", ") + to_string(name) +
               (h != st.run.handles.end() && h->second ? "" : " (down, not restarted)");
  }
  end_job(self, make_error(errc::timeout,
                           "the job made no progress for " + std::to_string(st.stall_timeout.count()) +
                             " ms (recovery_config::stall_timeout): step " + std::to_string(slowest) + " of " +
                             std::to_string(st.cfg.training.steps) + " waits for " +
                             (waiting.empty() ? std::string("no worker") : waiting) + "; where each runs: " +
                             (st.cfg.placement ? st.cfg.placement->where() : std::string("this process"))));
}

// Schedules a job_tick for the next timed fault or window deadline, unless
// one is due sooner already.
void schedule_tick(controller_actor* self) {
  using namespace std::chrono;
  auto& st = self->state;
  const milliseconds none = hours(1);
  auto wait = st.faults->until_next(none, elapsed_ms(st));
  auto now = steady_clock::now();
  if (auto due = st.progress.checkpoints->next_deadline())
    wait = std::min(wait, duration_cast<milliseconds>(*due - now) + milliseconds(1));
  if (auto due = st.progress.checkpoints->storage_deadline())
    wait = std::min(wait, duration_cast<milliseconds>(*due - now) + milliseconds(1));
  if (auto due = stall_deadline(st))
    wait = std::min(wait, duration_cast<milliseconds>(*due - now) + milliseconds(1));
  if (wait >= none)
    return;
  wait = std::max(wait, milliseconds(0));
  auto at = now + wait;
  if (st.progress.tick_at && *st.progress.tick_at <= at)
    return;
  st.progress.tick_at = at;
  self->delayed_send(self, wait, job_tick_atom::value);
}

}  // namespace

// What follows every message while the tree runs: the faults that came due
// strike, the window is watched, the next deadline is scheduled.
void follow_up(controller_actor* self) {
  auto& st = self->state;
  if (!st.run.core.running())
    return;
  if (st.readout.scoring.empty())  // else once the score is in (readout_state)
    st.faults->fire_due(st.progress.slowest(), elapsed_ms(st));
  watch_window(self);
  watch_storage(self);
  if (st.run.core.running())
    watch_stall(self);
  if (st.run.core.running())
    schedule_tick(self);
}

caf::error not_running() {
  return make_error(errc::shutting_down, "the job is not running");
}

bool held(controller_actor* self, std::function<void()> again) {
  if (!self->state.run.core.restarting())
    return false;
  self->state.run.deferred.push_back(std::move(again));
  return true;
}

bool admitted(controller_actor* self, caf::response_promise& rp, std::function<void()> again) {
  switch (self->state.run.core.request()) {
    case controller_action::serve: return true;
    case controller_action::hold: self->state.run.deferred.push_back(std::move(again)); return false;
    default: rp.deliver(not_running()); return false;
  }
}

namespace {

void run_deferred(controller_actor* self) {
  auto held = std::move(self->state.run.deferred);
  self->state.run.deferred.clear();
  for (auto& again : held) again();
}

// --- The run begins -------------------------------------------------------

void init(controller_actor* self, placed_job_config cfg, run_identity run,
          std::shared_ptr<event_feed> feed) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.workers_now = std::make_shared<workers_box>(st.cfg.training.schedule);
  st.run.identity = std::move(run);
  st.readout.result.run_id = st.run.identity.run_id;
  st.readout.result.config_hash = st.run.identity.config_hash;
  st.feed = std::move(feed);
  st.hooks.self = self;
  auto& c = st.cfg;
  if (c.checkpoints.peer_copy && !c.placement) {
    st.run.replicas = std::make_shared<replica_store>();
    auto replica = spawn_snapshot_replica(self->system(), st.run.replicas);
    st.run.replica = replica;
    self->attach_functor([replica](const caf::error&) { caf::anon_send_exit(replica, caf::exit_reason::user_shutdown); });
  }
  auto& layout = c.training_model->layout();
  st.run.parts = partition_keys(layout.dense_size(), layout.sparse_key_count(), c.training.shards);
  st.run.shard_cfgs = shard_configs(c, st.run.parts);
  st.progress.checkpoints.emplace(c.checkpoints.every, c.checkpoints.timeout, c.checkpoints.storage_deadline);
  st.stall_timeout = stall_timeout_for(c, c.placement ? c.placement->longest_wait() : std::chrono::milliseconds{0},
                                       c.placement && c.placement->application_loops() > 0);
  st.run.rollbacks.emplace(c.recovery.max_restarts, c.recovery.restart_period);
  // A fault that fires after N messages of a kind: the link that counts the
  // Nth tells the controller (a weak handle: the links outlive no one).
  st.faults.emplace(c.faults.plan, c.checkpoints.dir, st.hooks,
                    [me = caf::actor_cast<caf::actor_addr>(self)](size_t i) {
                      if (auto a = caf::actor_cast<caf::actor>(me))
                        caf::anon_send(a, fire_atom::value, static_cast<uint64_t>(i));
                    });
}

caf::result<caf::ok_atom> begin(controller_actor* self) {
  auto& run = self->state.run;
  if (run.core.begin(run.tree || run.begun.pending()) != controller_action::launch)
    return make_error(errc::invalid_argument, "the job has begun already");
  run.begun = self->make_response_promise();
  auto rp = run.begun;
  if (self->state.cfg.checkpoints.resume)
    if (auto err = resume_from_newest_checkpoint(self)) {
      end_job(self, std::move(err));
      return rp;
    }
  launch_tree(self);
  return rp;
}

// --- Messages of a running tree --------------------------------------------

void on_step(controller_actor* self, const step_report& r) {
  auto& st = self->state;
  auto& p = st.progress;
  if (!st.run.core.takes_report(r.epoch) || r.worker >= p.worker_step.size())
    return;
  if (r.step > p.worker_step[r.worker])
    p.last_step_at = std::chrono::steady_clock::now();
  p.worker_step[r.worker] = r.step;
  say_worker_change(self, r.worker, r.step, false);
  p.loss_sum += r.loss;
  ++p.loss_count;
  auto slowest = p.slowest();
  if (st.cfg.progress.every > 0 && slowest >= p.last_progress + st.cfg.progress.every) {
    // Progress points sit on the multiples of progress.every. The slowest
    // worker's step can move by more than one (a restarted worker resumes
    // where its shards need it); a point set at that step shifted every
    // later one, and the run's last was lost.
    p.last_progress = slowest - slowest % st.cfg.progress.every;
    report_progress(self, p.last_progress);
  }
}

void on_done(controller_actor* self, const worker_report& r) {
  auto& st = self->state;
  if (!st.run.core.takes_report(r.epoch))
    return;
  // The last word of a worker's incarnation held in reserve, which a change
  // let join since (job_workers.cpp): its next incarnation runs the steps.
  if (r.steps >= reserve_step && !st.cfg.training.schedule.reserved(r.worker))
    return;
  st.progress.done.insert(r.worker);
  st.progress.last_step_at = std::chrono::steady_clock::now();
  st.progress.reports[r.worker] = r;  // a worker killed after its last step reports again
  say_worker_change(self, r.worker, r.steps, true);
  // A done worker has completed every step, though it may not have
  // reported the last ones: an incarnation that finds the shards through
  // its last step ends without a step report. Faults due at those steps
  // are due now.
  if (r.worker < st.progress.worker_step.size())
    st.progress.worker_step[r.worker] = st.cfg.training.steps;
  maybe_finish(self);
}

void on_rollback_request(controller_actor* self, uint32_t epoch, const std::string& why) {
  switch (self->state.run.core.rollback_requested(epoch)) {
    case controller_action::hold:
      self->state.run.deferred.push_back([=] { on_rollback_request(self, epoch, why); });
      return;
    case controller_action::roll_back: roll_back(self, why); return;
    default: return;
  }
}

void on_job_event(controller_actor* self, job_event& e) {
  if (e.kind == event_kind::checkpoint_failed)
    return on_checkpoint_failed(self, std::move(e));
  if (e.kind == event_kind::backpressure)
    self->state.progress.checkpoints->paused(e.actor);
  else if (e.kind == event_kind::resumed)
    self->state.progress.checkpoints->resumed(e.actor);
  record(self, std::move(e));
}

void on_supervision_event(controller_actor* self, const supervision::event& e) {
  if (e.kind == supervision::event_kind::restart || e.kind == supervision::event_kind::start) {
    self->state.faults->back(e.child);
    self->state.progress.checkpoints->resumed(e.child);  // a new incarnation starts unpaused
  }
  record(self, from_supervision(e));
}

// The current tree's root went down: it escalated (the job fails), or it
// was killed (the job rolls back), or it could not start its children.
void on_root_down(controller_actor* self, const caf::error& reason) {
  switch (self->state.run.core.root_down(is(reason, errc::escalated))) {
    case controller_action::fail:
      end_job(self, reason ? reason
                           : make_error(errc::start_failed, "the supervision tree stopped while starting"));
      return;
    case controller_action::escalate:
      record(self, make_job_event(event_kind::escalate, "root", describe(reason)));
      end_job(self, reason);
      return;
    case controller_action::roll_back:
      roll_back(self, "the root supervisor went down: " + self->system().render(reason));
      return;
    default:
      return;  // stopped on purpose
  }
}

void on_down(controller_actor* self, const caf::down_msg& dm) {
  auto& run = self->state.run;
  if (run.tree && !run.root_down && dm.source == run.tree->root().address()) {
    run.root_down = true;
    on_root_down(self, dm.reason);
  }
  if (run.awaited.erase(dm.source) > 0 && run.awaited.empty() && run.then) {
    auto then = std::move(run.then);
    run.then = nullptr;
    then();
  }
}

void on_guard(controller_actor* self, uint64_t transition) {
  auto& run = self->state.run;
  if (transition != run.transition || !run.then)
    return;
  run.awaited.clear();
  auto then = std::move(run.then);
  run.then = nullptr;
  then();
}

caf::error controller_failed(std::exception_ptr& ep) {
  std::string what = "an unknown exception";
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  return make_error(errc::invalid_argument, "the job controller failed: " + what);
}

caf::behavior job_controller(controller_actor* self, placed_job_config cfg, run_identity run,
                             std::shared_ptr<event_feed> feed) {
  init(self, std::move(cfg), std::move(run), std::move(feed));
  // What no handler takes (a late answer) is ignored without a reply: an
  // error sent back would end its sender (CAF's default error handler),
  // and the sender may be the tree's event stream. Errors sent here are
  // ignored for the same reason.
  self->set_default_handler([](caf::scheduled_actor*, caf::message_view&) -> caf::result<caf::message> {
    return caf::message{};  // an empty answer to a plain message is not sent
  });
  self->set_error_handler([](caf::error&) {});
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm); });
  self->set_exception_handler([=](std::exception_ptr& ep) -> caf::error {
    auto err = controller_failed(ep);
    end_job(self, err);
    return err;
  });
  auto promise = [self] { return self->make_response_promise(); };
  return {
    [=](begin_atom) { return begin(self); },
    [=](stop_atom) -> caf::result<caf::ok_atom> {
      auto rp = promise();
      stop_now(self, rp);
      return rp;
    },
    [=](params_atom) -> caf::result<job::parameters_now> {
      auto rp = promise();
      read_now(self, rp);
      return rp;
    },
    [=](rows_atom, const std::string& table, const std::vector<uint64_t>& keys) -> caf::result<std::vector<float>> {
      auto rp = promise();
      table_request(self, table, keys, rp);
      return rp;
    },
    [=](table_atom, const std::string& table) -> caf::result<job::table_now> {
      auto rp = promise();
      table_request(self, table, std::nullopt, rp);
      return rp;
    },
    [=](kill_atom, const fault& f) -> caf::result<caf::ok_atom> {
      auto rp = promise();
      kill_request(self, f, rp);
      return rp;
    },
    [=](inject_atom, const fault& f) -> caf::result<caf::ok_atom> {
      auto rp = promise();
      inject_request(self, f, rp);
      return rp;
    },
    [=](move_atom, const std::string& name, const std::string& why) -> caf::result<uint64_t> {
      auto rp = promise();
      move_request(self, name, why, rp);
      return rp;
    },
    [=](workers_atom, const std::string& items) -> caf::result<uint64_t> {
      auto rp = promise();
      change_workers_request(self, items, rp);
      return rp;
    },
    [=](worker_lost_atom, uint32_t worker) -> caf::result<uint64_t> {
      auto rp = promise();
      lost_worker_request(self, worker, rp);
      return rp;
    },
    [=](job_status_atom) { return progress_text(self->state); },
    [=](const step_report& r) {
      on_step(self, r);
      follow_up(self);
    },
    [=](done_atom, const worker_report& r) {
      on_done(self, r);
      follow_up(self);
    },
    [=](rollback_atom, uint32_t epoch, uint32_t, const std::string& why) {
      on_rollback_request(self, epoch, why);
    },
    [=](job_event& e) {
      on_job_event(self, e);
      follow_up(self);
    },
    [=](const supervision::event& e) {
      on_supervision_event(self, e);
      follow_up(self);
    },
    [=](const supervision::directory_update& u) {
      on_directory(self, u);
      follow_up(self);
    },
    [=](const checkpoint_committed& c) {
      on_committed(self, c);
      follow_up(self);
    },
    [=](fire_atom, uint64_t i) {
      self->state.faults->count_reached(i);
      follow_up(self);
    },
    [=](job_tick_atom) {
      self->state.progress.tick_at.reset();
      follow_up(self);
    },
    [=](reread_atom) { maybe_finish(self); },
    [=](guard_atom, uint64_t transition) { on_guard(self, transition); },
    [=](caf::ok_atom) {},  // the event stream's answer to the subscription
  };
}

}  // namespace

caf::actor spawn_job_controller(caf::actor_system& sys, placed_job_config cfg, run_identity run,
                                std::shared_ptr<event_feed> feed) {
  // See job_controller.hpp: detached where the job's actors train here.
  if (cfg.placement)
    return sys.spawn(job_controller, std::move(cfg), std::move(run), std::move(feed));
  return sys.spawn<caf::detached>(job_controller, std::move(cfg), std::move(run), std::move(feed));
}

uint64_t progress_state::slowest() const {
  return worker_step.empty() ? 0 : *std::min_element(worker_step.begin(), worker_step.end());
}

int64_t elapsed_ms(const controller_state& st) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               st.started)
    .count();
}

void record(controller_actor* self, job_event e) {
  record_at(self, std::move(e), std::chrono::steady_clock::now());
}

void record_at(controller_actor* self, job_event e, std::chrono::steady_clock::time_point at) {
  auto& readout = self->state.readout;
  if (!readout.scoring.empty() || !readout.node_fault_marks.empty())
    readout.held.push_back({std::move(e), at});
  else
    append_event(self, std::move(e), at);
}

void release_held(controller_actor* self) {
  auto& readout = self->state.readout;
  while (!readout.held.empty() && readout.node_fault_marks.empty() &&
         (readout.scoring.empty() || readout.held.front().at <= readout.scoring.front().at)) {
    auto& next = readout.held.front();
    append_event(self, std::move(next.event), next.at);
    readout.held.pop_front();
  }
}

void append_event(controller_actor* self, job_event e, std::chrono::steady_clock::time_point at) {
  auto& st = self->state;
  if (st.run.core.ended())
    return;  // the timeline closed with the outcome
  e.at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - st.started).count();
  e.at_us = std::chrono::duration_cast<std::chrono::microseconds>(at - st.started).count();
  auto& result = st.readout.result;
  if (e.kind == event_kind::restart)
    ++result.restarts[e.actor];
  st.feed->push(e);
  result.events.push_back(std::move(e));
}

// --- The run's ends ---------------------------------------------------------

void tree_up(controller_actor* self) {
  auto& run = self->state.run;
  run.core.up();
  self->state.progress.last_step_at = std::chrono::steady_clock::now();
  // Faults due at once strike before job::start returns: a short run may
  // be over before its caller looks again.
  follow_up(self);
  if (run.begun.pending())
    run.begun.deliver(caf::ok_atom::value);
  run_deferred(self);
  maybe_finish(self);
}

void end_job(controller_actor* self, caf::expected<job_result> outcome) {
  auto& run = self->state.run;
  if (run.core.ended())
    return;
  // The timeline closes in order: progress events still waiting for their
  // score go unscored, with the events held behind them.
  auto& readout = self->state.readout;
  readout.node_fault_marks.clear();
  while (!readout.scoring.empty()) {
    auto waiting = std::move(readout.scoring.front());
    readout.scoring.pop_front();
    waiting.event.detail += " (no evaluation: the run ended first)";
    append_event(self, std::move(waiting.event), waiting.at);
    release_held(self);
  }
  release_held(self);
  const bool stopped = run.core.end().stopped;
  // An application's loops (ps_client) hear it at once, whatever they wait
  // on, and before job::stop returns: after it, every request fails.
  auto why = make_error(errc::shutting_down,
                        std::string("the job has ended") +
                          (stopped ? " (stopped)" : outcome ? "" : ": " + describe(outcome.error())));
  for (auto& c : self->state.cfg.channels) c->close(why);
  if (run.begun.pending())
    run.begun.deliver(outcome ? caf::error{not_running()} : outcome.error());
  for (auto& rp : run.stoppers)
    if (stopped)
      rp.deliver(caf::ok_atom::value);
    else
      rp.deliver(not_running());
  run.stoppers.clear();
  self->state.feed->close(std::move(outcome));
  run.tree.reset();  // whatever still runs of it stops (its destructor asks the root)
  run_deferred(self);  // each now fails: the job has ended
}

void after_downs(controller_actor* self, std::vector<caf::actor_addr> who, caf::timespan guard,
                 std::function<void()> then) {
  auto& run = self->state.run;
  run.awaited.clear();
  for (auto& a : who)
    if (a)
      run.awaited.insert(a);
  ++run.transition;
  if (run.awaited.empty()) {
    then();
    return;
  }
  run.then = std::move(then);
  self->delayed_send(self, guard, guard_atom::value, run.transition);
}

}  // namespace keel
