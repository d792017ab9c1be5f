// The part of a supervisor that stops children: one at a time, in the order
// asked (reverse start order, always), each by its shutdown policy.
#include <algorithm>

#include <caf/exit_reason.hpp>

#include "supervision/supervisor_state.hpp"

namespace keel::supervision::detail {

namespace {

void finish_job(supervisor_actor* self) {
  auto& st = self->state;
  auto then = std::move(st.stopping->then);
  st.stopping.reset();
  if (then)
    then();
  drain_deferred(self);
}

void stop_next(supervisor_actor* self) {
  auto& st = self->state;
  auto& job = *st.stopping;
  job.current.clear();
  while (!job.queue.empty()) {
    auto id = job.queue.front();
    job.queue.erase(job.queue.begin());
    auto* c = find(self, id);
    if (c == nullptr || c->status != child_status::running)
      continue;
    c->status = child_status::stopping;
    job.current = id;
    const auto& policy = c->spec.shutdown;
    if (policy.how == shutdown_policy::mode::brutal_kill) {
      self->send_exit(c->handle, caf::exit_reason::kill);
      return;
    }
    // The kill timer is set before the exit signal goes out, so a child
    // that sees the signal can count on the timer already running.
    if (policy.how == shutdown_policy::mode::timeout) {
      job.kill_ticket = st.next_ticket++;
      st.services.clock->send_later(self, policy.timeout,
                                    caf::make_message(kill_timer_atom::value, job.kill_ticket));
    }
    self->send_exit(c->handle, caf::exit_reason::user_shutdown);
    return;  // the child's down_msg resumes the sequence
  }
  finish_job(self);
}

}  // namespace

void stop_children(supervisor_actor* self, std::vector<std::string> ids, name_state after,
                   std::function<void()> then, bool final) {
  auto& st = self->state;
  st.stopping = stop_job{std::move(ids), "", 0, after, final, std::move(then)};
  stop_next(self);
}

bool on_stop_progress(supervisor_actor* self, const caf::actor_addr& source,
                      const caf::error& reason) {
  auto& st = self->state;
  if (!st.stopping)
    return false;
  auto& job = *st.stopping;
  auto it = std::find_if(st.children.begin(), st.children.end(),
                         [&](const child_record& c) { return c.handle && c.handle.address() == source; });
  if (it == st.children.end())
    return false;
  auto queued = std::find(job.queue.begin(), job.queue.end(), it->spec.id);
  bool is_current = it->spec.id == job.current;
  if (!is_current && queued == job.queue.end())
    return false;
  // A queued child that went down by itself before its turn is as stopped
  // as one we stopped: it needs no exit signal any more.
  if (queued != job.queue.end())
    job.queue.erase(queued);
  forget_live(self, it->handle);
  it->handle = caf::actor{};
  it->status = child_status::idle;
  announce(self, *it, job.after);
  event e;
  e.kind = is_current ? event_kind::shutdown : event_kind::down;
  e.child = it->spec.id;
  e.incarnation = it->incarnation;
  e.reason = reason;
  publish(self, std::move(e));
  if (is_current)
    stop_next(self);
  return true;
}

void on_kill_timer(supervisor_actor* self, uint64_t ticket) {
  auto& st = self->state;
  if (!st.stopping || st.stopping->kill_ticket != ticket || st.stopping->current.empty())
    return;
  if (auto* c = find(self, st.stopping->current); c && c->status == child_status::stopping)
    self->send_exit(c->handle, caf::exit_reason::kill);
}

bool busy(supervisor_actor* self) {
  return self->state.stopping.has_value() || self->state.starting.has_value() ||
         self->state.awaiting_start.has_value();
}

void when_idle(supervisor_actor* self, std::function<void()> f) {
  if (busy(self))
    self->state.deferred.push_back(std::move(f));
  else
    f();
}

void drain_deferred(supervisor_actor* self) {
  // Work that arrived during a sequence runs now, in arrival order, until it
  // starts another sequence (which drains the rest when it ends).
  auto& st = self->state;
  while (!busy(self) && !st.deferred.empty() && !st.exited) {
    auto f = std::move(st.deferred.front());
    st.deferred.pop_front();
    f();
  }
}

}  // namespace keel::supervision::detail
