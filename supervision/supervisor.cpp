// The supervisor actor: the policy documented in supervisor.hpp, in the same
// order (start, a child goes down, intensity, strategy, backoff, snapshots,
// shutdown). Stopping children one at a time lives in stop_sequence.cpp.
#include <algorithm>
#include <exception>

#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "messages/errors.hpp"
#include "supervision/supervisor_state.hpp"

namespace keel::supervision::detail {

// -- shared helpers ---------------------------------------------------------

child_record* find(supervisor_actor* self, const std::string& id) {
  for (auto& c : self->state.children)
    if (c.spec.id == id)
      return &c;
  return nullptr;
}

clock::time_point now(supervisor_actor* self) {
  return self->state.services.clock->now();
}

void publish(supervisor_actor* self, event e) {
  e.supervisor = self->state.spec.name;
  e.at_ns = now(self).time_since_epoch().count();
  if (self->state.services.events)
    self->send(self->state.services.events, std::move(e));
}

void announce(supervisor_actor* self, const child_record& c, name_state s) {
  if (self->state.services.directory)
    self->send(self->state.services.directory, register_atom::value,
               directory_update{c.spec.id, c.incarnation, s,
                                s == name_state::up ? c.handle : caf::actor{}});
}

void erase_child(supervisor_actor* self, const std::string& id) {
  auto& cs = self->state.children;
  cs.erase(std::remove_if(cs.begin(), cs.end(),
                          [&](const child_record& c) { return c.spec.id == id; }),
           cs.end());
}

void forget_live(supervisor_actor* self, const caf::actor& handle) {
  auto& live = *self->state.live;
  live.erase(std::remove(live.begin(), live.end(), handle), live.end());
}

namespace {

std::string ms(clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

bool abnormal(const caf::error& reason) {
  return reason && reason != caf::exit_reason::normal &&
         reason != caf::exit_reason::user_shutdown;
}

bool should_restart(restart_type t, const caf::error& reason) {
  switch (t) {
    case restart_type::permanent: return true;
    case restart_type::transient: return abnormal(reason);
    case restart_type::temporary: return false;
  }
  return false;
}

void terminate(supervisor_actor* self, caf::error reason);
void on_failure(supervisor_actor* self, const std::string& id, caf::error reason);

// -- start ------------------------------------------------------------------

// The candidates for a start: the spec's source's, newest first. The
// validator decides; the event reports the choice.
snapshot_choice pick_snapshot(const child_record& c) {
  if (!c.spec.snapshots)
    return {};
  return choose_snapshot(c.spec.snapshots(c.spec.id), c.spec.validate);
}

caf::error start_failure(const std::string& id, uint64_t incarnation, const std::string& why) {
  return make_error(errc::start_failed,
                    "child '" + id + "' incarnation " + std::to_string(incarnation) + ": " + why);
}

// Calls `f` (a start function or a pending start function), turning its
// error, an exception or an empty handle into a start failure.
template <class Start, class Valid>
auto call_start(supervisor_actor* self, const restart_context& ctx, const Start& f, Valid valid)
  -> decltype(f(self->system(), ctx)) {
  try {
    auto h = f(self->system(), ctx);
    if (!h)
      return start_failure(ctx.id, ctx.incarnation, describe(h.error()));
    if (!valid(*h))
      return start_failure(ctx.id, ctx.incarnation, "the start function returned no actor");
    return h;
  } catch (const std::exception& e) {
    return start_failure(ctx.id, ctx.incarnation, std::string("the start function threw: ") + e.what());
  } catch (...) {
    return start_failure(ctx.id, ctx.incarnation, "the start function threw");
  }
}

// Child ctx.id started as incarnation ctx.incarnation with handle `h`: it
// is monitored, registered and announced, and `start` or `restart` published.
void adopt(supervisor_actor* self, const restart_context& ctx, snapshot_choice choice, caf::actor h) {
  auto& c = *find(self, ctx.id);
  c.handle = std::move(h);
  c.incarnation = ctx.incarnation;
  c.status = child_status::running;
  c.started_at = now(self);
  self->monitor(c.handle);
  self->state.live->push_back(c.handle);
  announce(self, c, name_state::up);
  event e;
  e.kind = c.incarnation == 1 ? event_kind::start : event_kind::restart;
  e.child = c.spec.id;
  e.incarnation = c.incarnation;
  e.from_snapshot = static_cast<bool>(choice.chosen);
  e.snapshot_label = choice.chosen.label;
  e.snapshots_rejected = std::move(choice.rejected);
  publish(self, std::move(e));
}

// Ends pending start `ticket` with `h` (or its error), unless it ended
// already: a handle answered after the timeout is killed, since nobody
// would supervise it.
void complete_pending(supervisor_actor* self, uint64_t ticket, caf::expected<caf::actor> h) {
  auto& st = self->state;
  if (!st.awaiting_start || st.awaiting_start->ticket != ticket) {
    if (h && *h)
      self->send_exit(*h, caf::exit_reason::kill);
    return;
  }
  auto a = std::move(*st.awaiting_start);
  st.awaiting_start.reset();
  if (h && !*h)
    h = make_error(errc::start_failed, "the answer was no actor");
  if (h) {
    adopt(self, a.ctx, std::move(a.choice), std::move(*h));
    a.then(caf::error{});
  } else {
    a.then(start_failure(a.ctx.id, a.ctx.incarnation, describe(h.error())));
  }
  drain_deferred(self);
}

}  // namespace

void start_one(supervisor_actor* self, const std::string& id, std::function<void(caf::error)> then) {
  auto& c = *find(self, id);
  restart_context ctx = self->state.services;
  ctx.id = c.spec.id;
  ctx.incarnation = c.incarnation + 1;
  auto choice = pick_snapshot(c);
  ctx.from = choice.chosen;
  if (!c.spec.start_pending) {
    if (!c.spec.start)
      return then(start_failure(ctx.id, ctx.incarnation, "the spec has no start function"));
    auto h = call_start(self, ctx, c.spec.start, [](const caf::actor& a) { return static_cast<bool>(a); });
    if (!h)
      return then(h.error());
    adopt(self, ctx, std::move(choice), std::move(*h));
    return then(caf::error{});
  }
  auto pending = call_start(self, ctx, c.spec.start_pending,
                            [](const pending_start& p) { return static_cast<bool>(p.answerer); });
  if (!pending)
    return then(pending.error());
  auto& st = self->state;
  auto ticket = st.next_ticket++;
  st.awaiting_start = awaited_start{ticket, ctx, std::move(choice), std::move(then)};
  st.services.clock->send_later(self, c.spec.start_timeout,
                                caf::make_message(start_timer_atom::value, ticket));
  // No CAF timeout: the bound is the tree's clock's (above), and an answer
  // after it must still be seen, to kill the handle it brings.
  self->request(pending->answerer, caf::infinite, std::move(pending->ask))
    .then([=](caf::actor& h) { complete_pending(self, ticket, std::move(h)); },
          [=](caf::error& err) { complete_pending(self, ticket, std::move(err)); });
}

void on_start_timer(supervisor_actor* self, uint64_t ticket) {
  auto& st = self->state;
  if (!st.awaiting_start || st.awaiting_start->ticket != ticket)
    return;
  auto timeout = find(self, st.awaiting_start->ctx.id)->spec.start_timeout;
  complete_pending(self, ticket,
                   make_error(errc::timeout, "no answer to its pending start within " + ms(timeout)));
}

namespace {

void start_next(supervisor_actor* self);

// Starts the children named in `ids`, in order, skipping running ones. A
// failed start ends the round; it is handled as a failure of that child (or,
// during the supervisor's own start, makes the supervisor give up).
void start_in_order(supervisor_actor* self, std::vector<std::string> ids, bool initial) {
  if (self->state.terminating)
    return;
  self->state.starting = start_job{std::move(ids), initial};
  start_next(self);
}

void end_start_job(supervisor_actor* self) {
  self->state.starting.reset();
  drain_deferred(self);
}

// Child `id` of the running start job has started (or failed to): the job
// goes on with the next child, or ends.
void started_next(supervisor_actor* self, const std::string& id, caf::error err) {
  auto& st = self->state;
  if (err) {
    bool initial = st.starting->initial;
    st.starting.reset();
    if (initial)
      terminate(self, make_error(errc::start_failed, "supervisor '" + st.spec.name +
                                                         "' could not start: " + describe(err)));
    else
      // Through the mailbox, not recursion: a child failing to start again
      // and again is bounded by intensity, and other messages interleave.
      self->send(self, start_failed_atom::value, id, std::move(err));
    drain_deferred(self);
    return;
  }
  auto* c = find(self, id);
  if (c->spec.kind == child_kind::supervisor) {
    // As in OTP, a supervisor child has started its own children before
    // its next sibling starts. Every CAF actor answers this probe once
    // initialised; a child that died instead shows up as a down_msg.
    self->request(c->handle, std::chrono::seconds(30), caf::sys_atom::value,
                  caf::get_atom::value, std::string{"info"})
      .then([=](caf::ok_atom, const std::string&, const caf::strong_actor_ptr&,
                const std::string&) { start_next(self); },
            [=](caf::error&) { start_next(self); });
    return;
  }
  start_next(self);
}

void start_next(supervisor_actor* self) {
  auto& st = self->state;
  auto& job = *st.starting;
  if (st.terminating)
    job.queue.clear();
  while (!job.queue.empty()) {
    auto id = job.queue.front();
    job.queue.erase(job.queue.begin());
    auto* c = find(self, id);
    if (c == nullptr || c->status == child_status::running)
      continue;
    c->status = child_status::idle;
    // Goes on in started_next: at once after a start function, when the
    // answer comes for a pending start.
    return start_one(self, id, [=](caf::error err) { started_next(self, id, std::move(err)); });
  }
  end_start_job(self);
}

void initial_start(supervisor_actor* self) {
  auto& st = self->state;
  if (st.spec.strategy == strategy::simple_one_for_one)
    return;  // the template waits for start_child
  std::vector<std::string> ids;
  for (auto& spec : st.spec.children) {
    st.children.push_back(child_record{spec, {}, 0, child_status::idle, 0, {}});
    ids.push_back(spec.id);
  }
  start_in_order(self, std::move(ids), true);
}

// -- a child goes down ------------------------------------------------------

void on_down(supervisor_actor* self, const caf::actor_addr& source, const caf::error& reason) {
  auto& st = self->state;
  if (on_stop_progress(self, source, reason))
    return;
  auto it = std::find_if(st.children.begin(), st.children.end(), [&](const child_record& c) {
    return c.handle && c.handle.address() == source;
  });
  if (it == st.children.end())
    return;  // an earlier incarnation, or not ours
  forget_live(self, it->handle);
  it->handle = caf::actor{};
  it->status = child_status::idle;
  if (!busy(self))
    return on_failure(self, it->spec.id, reason);
  // The child is marked dead at once (so no stop sequence waits for it), but
  // what to do about it is decided after the running sequence, unless that
  // sequence has restarted it meanwhile (OTP ignores an old pid's exit too).
  st.deferred.push_back([=, id = it->spec.id, inc = it->incarnation] {
    auto* c = find(self, id);
    if (c != nullptr && c->incarnation == inc && c->status == child_status::idle)
      on_failure(self, id, reason);
  });
}

// Which children restart together when `id` fails, in start order.
std::vector<std::string> restart_set(supervisor_actor* self, const std::string& id) {
  auto& cs = self->state.children;
  std::vector<std::string> ids;
  auto pos = std::find_if(cs.begin(), cs.end(), [&](const child_record& c) { return c.spec.id == id; });
  switch (self->state.spec.strategy) {
    case strategy::one_for_one:
    case strategy::simple_one_for_one: ids.push_back(id); break;
    case strategy::one_for_all: pos = cs.begin(); [[fallthrough]];
    case strategy::rest_for_one:
      for (; pos != cs.end(); ++pos)
        ids.push_back(pos->spec.id);
      break;
  }
  return ids;
}

clock::duration next_backoff(supervisor_actor* self, child_record& c) {
  const auto& policy = c.spec.backoff;
  if (now(self) - c.started_at >= policy.reset_after)
    c.consecutive_restarts = 0;
  ++c.consecutive_restarts;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  return policy.delay(c.consecutive_restarts, uniform(self->state.rng));
}

void escalate(supervisor_actor* self, const std::string& id, const caf::error& last) {
  auto& st = self->state;
  auto why = make_error(errc::escalated,
                        "supervisor '" + st.spec.name + "' gave up: child '" + id +
                            "' failed more than " + std::to_string(st.intensity->max_restarts()) +
                            " time(s) in " + ms(st.intensity->period()) +
                            "; last failure: " + describe(last));
  event e;
  e.kind = event_kind::escalate;
  e.child = id;
  e.reason = why;
  publish(self, std::move(e));
  terminate(self, std::move(why));
}

// Restarts `id` and, by strategy, its siblings: siblings in the set stop in
// reverse start order (temporary ones are stopped and forgotten), then all
// start in order, at once or when the backoff timer fires. The timer is set
// before the directory hears `restarting` and before `down` is published, so
// whoever reacts to either (a test moving a manual clock on) finds it running.
void restart(supervisor_actor* self, const std::string& id, clock::duration delay, event down) {
  auto& st = self->state;
  auto ids = restart_set(self, id);
  std::vector<std::string> to_stop(ids.rbegin(), ids.rend());
  to_stop.erase(std::remove(to_stop.begin(), to_stop.end(), id), to_stop.end());
  std::vector<std::string> to_start;
  for (const auto& sib : ids)
    if (find(self, sib)->spec.restart != restart_type::temporary || sib == id)
      to_start.push_back(sib);
  if (delay > clock::duration{0}) {
    auto ticket = st.next_ticket++;
    find(self, id)->status = child_status::restart_pending;
    st.pending_restarts.emplace(ticket, to_start);
    st.services.clock->send_later(self, delay,
                                  caf::make_message(restart_timer_atom::value, ticket));
  }
  for (const auto& sib : to_start)
    if (auto* s = find(self, sib); s->status != child_status::running)
      announce(self, *s, name_state::restarting);
  // Published after the directory heard `restarting`: whoever reacts to the
  // event finds the name restarting, never still up.
  publish(self, std::move(down));
  stop_children(self, to_stop, name_state::restarting, [=] {
    for (const auto& sib : ids)
      if (auto* s = find(self, sib); s && s->spec.restart == restart_type::temporary && sib != id)
        erase_child(self, sib);
    if (delay <= clock::duration{0})
      start_in_order(self, to_start, false);
  });
}

// The heart of the policy: a child stopped without being asked to.
void on_failure(supervisor_actor* self, const std::string& id, caf::error reason) {
  auto& st = self->state;
  auto* c = find(self, id);
  event down;
  down.kind = event_kind::down;
  down.child = id;
  down.incarnation = c->incarnation;
  down.reason = reason;
  if (st.terminating || !should_restart(c->spec.restart, reason)) {
    announce(self, *c, name_state::gone);
    publish(self, std::move(down));
    if (c->spec.restart == restart_type::temporary || st.spec.strategy == strategy::simple_one_for_one)
      erase_child(self, id);
    return;
  }
  if (!st.intensity->admit(now(self))) {
    publish(self, std::move(down));
    return escalate(self, id, reason);
  }
  auto delay = next_backoff(self, *c);
  down.will_restart = true;
  down.restart_delay_ns = delay.count();
  restart(self, id, delay, std::move(down));
}

// -- shutdown ---------------------------------------------------------------

void terminate(supervisor_actor* self, caf::error reason) {
  auto& st = self->state;
  if (st.terminating)
    return;
  st.terminating = true;
  st.exit_reason = std::move(reason);
  st.pending_restarts.clear();
  when_idle(self, [=] {
    auto& st = self->state;
    std::vector<std::string> ids;
    for (auto c = st.children.rbegin(); c != st.children.rend(); ++c) {
      if (c->status != child_status::running)
        announce(self, *c, name_state::gone);
      ids.push_back(c->spec.id);
    }
    stop_children(self, std::move(ids), name_state::gone, [=] {
      // Requests still waiting for a quiet moment are answered now (each
      // sees `terminating` and fails with shutting_down), not left hanging.
      auto waiting = std::move(self->state.deferred);
      self->state.deferred.clear();
      for (auto& f : waiting)
        f();
      self->state.exited = true;
      self->quit(self->state.exit_reason);
    }, true);
  });
}

caf::behavior supervisor(supervisor_actor* self, supervisor_spec spec, restart_context services) {
  auto& st = self->state;
  st.intensity.emplace(spec.max_restarts, spec.period);
  st.rng.seed(spec.random_seed);
  st.spec = std::move(spec);
  st.services = std::move(services);
  if (!st.services.clock)
    st.services.clock = make_system_clock();
  self->attach_functor([live = st.live] {
    for (auto& child : *live)
      caf::anon_send_exit(child, caf::exit_reason::kill);
  });
  self->set_down_handler([=](caf::down_msg& dm) { on_down(self, dm.source, dm.reason); });
  // Any exit signal but a normal one (CAF017: exit handlers swallow
  // user_shutdown) is a request to stop in order; kill cannot be trapped.
  self->set_exit_handler([=](caf::exit_msg& em) {
    if (em.reason && em.reason != caf::exit_reason::normal)
      terminate(self, em.reason);
  });
  initial_start(self);
  return {
    [=](start_failed_atom, const std::string& id, caf::error& err) {
      when_idle(self, [=] {
        auto* c = find(self, id);
        if (c != nullptr && c->status != child_status::running)
          on_failure(self, id, err);
      });
    },
    [=](restart_timer_atom, uint64_t ticket) {
      when_idle(self, [=] {
        auto i = self->state.pending_restarts.find(ticket);
        if (i == self->state.pending_restarts.end())
          return;
        auto ids = std::move(i->second);
        self->state.pending_restarts.erase(i);
        start_in_order(self, std::move(ids), false);
      });
    },
    [=](kill_timer_atom, uint64_t ticket) { on_kill_timer(self, ticket); },
    [=](start_timer_atom, uint64_t ticket) { on_start_timer(self, ticket); },
    [=](start_child_atom, const std::string& id) {
      auto rp = self->make_response_promise<caf::actor>();
      start_child_from_template(self, id, rp);
      return rp;
    },
    [=](start_child_atom, child_spec& spec) {
      auto rp = self->make_response_promise<caf::actor>();
      start_child_from_spec(self, std::move(spec), rp);
      return rp;
    },
    [=](terminate_child_atom, const std::string& id) {
      auto rp = self->make_response_promise();
      terminate_child_request(self, id, rp);
      return rp;
    },
    [=](which_children_atom) {
      auto rp = self->make_response_promise<std::vector<child_info>>();
      which_children_request(self, rp);
      return rp;
    },
  };
}

}  // namespace

}  // namespace keel::supervision::detail

namespace keel::supervision {

caf::actor spawn_supervisor(caf::actor_system& sys, supervisor_spec spec,
                            const restart_context& ctx) {
  return sys.spawn(detail::supervisor, std::move(spec), ctx);
}

}  // namespace keel::supervision
