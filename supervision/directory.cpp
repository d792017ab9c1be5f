#include "supervision/directory.hpp"

#include <map>
#include <unordered_map>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "messages/errors.hpp"
#include "supervision/protocol.hpp"

namespace keel::supervision {

const char* to_string(name_state s) {
  switch (s) {
    case name_state::up: return "up";
    case name_state::restarting: return "restarting";
    case name_state::gone: return "gone";
  }
  return "unknown";
}

namespace {

using steady = std::chrono::steady_clock;
using resume_fn = std::function<void(caf::expected<directory_update>)>;

// A reply type nobody sends: every real reply to a forwarded call reaches the
// error handler as sec::unexpected_response carrying the reply (CAF 0.17
// re-invokes a response handler that did not match with that error), which is
// how the directory relays replies of any type.
struct unmatchable {};

struct waiter {
  std::string name;
  uint64_t min_incarnation;
  resume_fn resume;
};

struct directory_state {
  std::unordered_map<std::string, directory_update> entries;
  std::unordered_map<std::string, std::vector<caf::actor>> watchers;
  std::map<uint64_t, waiter> waiters;
  std::map<uint64_t, caf::response_promise> calls;  // answered on shutdown if still open
  uint64_t next_id = 0;
  caf::actor_addr owner;
  static inline const char* name = "keel.directory";
};

using directory_actor = caf::stateful_actor<directory_state>;

caf::error still_waiting(const std::string& name, const directory_state& st) {
  auto i = st.entries.find(name);
  if (i == st.entries.end())
    return make_error(errc::timeout, "name '" + name + "' was not registered in time");
  return make_error(errc::timeout, "name '" + name + "' still " + to_string(i->second.state) +
                                       " (last incarnation " +
                                       std::to_string(i->second.incarnation) + ")");
}

// Calls `resume` with the entry once `name` is up at min_incarnation or later,
// with not_found if it is gone, or with timeout after `budget`.
void wait_for(directory_actor* self, const std::string& name, uint64_t min_incarnation,
              caf::timespan budget, resume_fn resume) {
  auto& st = self->state;
  auto i = st.entries.find(name);
  if (i != st.entries.end()) {
    const auto& e = i->second;
    if (e.state == name_state::up && e.incarnation >= min_incarnation)
      return resume(e);
    if (e.state == name_state::gone)
      return resume(make_error(errc::not_found, "name '" + name + "' is gone"));
  }
  if (budget <= caf::timespan{0})
    return resume(still_waiting(name, st));
  auto id = st.next_id++;
  st.waiters.emplace(id, waiter{name, min_incarnation, std::move(resume)});
  self->delayed_send(self, budget, wait_expired_atom::value, id);
}

void on_update(directory_actor* self, const directory_update& u) {
  auto& st = self->state;
  st.entries[u.name] = u;
  if (auto w = st.watchers.find(u.name); w != st.watchers.end())
    for (const auto& watcher : w->second)
      self->send(watcher, u);
  for (auto i = st.waiters.begin(); i != st.waiters.end();) {
    auto& w = i->second;
    bool ready = w.name == u.name && ((u.state == name_state::up && u.incarnation >= w.min_incarnation) ||
                                      u.state == name_state::gone);
    if (!ready) {
      ++i;
      continue;
    }
    auto resume = std::move(w.resume);
    i = st.waiters.erase(i);
    if (u.state == name_state::up)
      resume(u);
    else
      resume(make_error(errc::not_found, "name '" + u.name + "' is gone"));
  }
}

caf::timespan remaining(steady::time_point deadline) {
  return std::max(caf::timespan{0},
                  std::chrono::duration_cast<caf::timespan>(deadline - steady::now()));
}

// One attempt to deliver a call: wait for an incarnation, forward, relay the
// reply. A call bounced unread by a dead incarnation is tried once more on
// the next one; anything else the child answers (errors included) is relayed.
void attempt_call(directory_actor* self, uint64_t call_id, std::string name, uint64_t min_inc,
                  steady::time_point deadline, caf::message msg, bool retried) {
  wait_for(self, name, min_inc, remaining(deadline), [=](caf::expected<directory_update> e) {
    auto& calls = self->state.calls;
    auto rp = calls.find(call_id);
    if (rp == calls.end())
      return;
    if (!e) {
      rp->second.deliver(e.error());
      calls.erase(rp);
      return;
    }
    auto incarnation = e->incarnation;
    self->request(e->handle, remaining(deadline), msg)
      .then([](unmatchable) {},
            [=](caf::error& err) {
              auto& calls = self->state.calls;
              auto rp = calls.find(call_id);
              if (rp == calls.end())
                return;
              auto done = [&](caf::message reply) {
                rp->second.deliver(std::move(reply));
                calls.erase(rp);
              };
              if (err == caf::sec::unexpected_response)
                return done(err.context());
              if (err == caf::sec::request_receiver_down && !retried)
                return attempt_call(self, call_id, name, incarnation + 1, deadline, msg, true);
              if (err == caf::sec::request_receiver_down)
                return done(caf::make_message(make_error(
                    errc::shutting_down, "call to '" + name + "': incarnation " +
                                             std::to_string(incarnation) + " died unread, twice")));
              if (err == caf::sec::request_timeout)
                return done(caf::make_message(make_error(
                    errc::timeout, "call to '" + name + "' incarnation " +
                                       std::to_string(incarnation) + ": no reply in budget")));
              done(caf::make_message(std::move(err)));
            });
  });
}

// Tells the sender every change of `name`, starting with its current entry.
void watch(directory_actor* self, const std::string& name) {
  auto who = caf::actor_cast<caf::actor>(self->current_sender());
  if (!who)
    return;
  self->monitor(who);
  self->state.watchers[name].push_back(who);
  if (auto i = self->state.entries.find(name); i != self->state.entries.end())
    self->send(who, i->second);
}

void drop_watcher(std::vector<caf::actor>& list, const caf::actor_addr& who) {
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const caf::actor& a) { return a.address() == who; }),
             list.end());
}

void stop(directory_actor* self) {
  auto& st = self->state;
  auto bye = make_error(errc::shutting_down, "the directory is stopping");
  for (auto& [id, w] : st.waiters)
    w.resume(bye);
  st.waiters.clear();
  for (auto& [id, rp] : st.calls)
    rp.deliver(bye);
  st.calls.clear();
  self->quit();
}

caf::behavior directory(directory_actor* self, caf::actor owner) {
  // Always spawned with an argument: CAF 0.17's spawn of a function without
  // one trips UBSan (CAF017.md, sanitizers).
  if (owner) {
    self->state.owner = owner.address();
    self->monitor(owner);
  }
  self->set_exit_handler([=](caf::exit_msg& em) {
    if (em.reason && em.reason != caf::exit_reason::normal)
      stop(self);  // answering every open call first
  });
  self->set_down_handler([=](caf::down_msg& dm) {
    if (dm.source == self->state.owner)
      return stop(self);
    for (auto& [name, list] : self->state.watchers)
      drop_watcher(list, dm.source);
  });
  return {
    [=](follow_atom, const caf::actor& owner) {
      self->state.owner = owner.address();
      self->monitor(owner);
    },
    [=](register_atom, const directory_update& u) { on_update(self, u); },
    [=](lookup_atom, const std::string& name) -> caf::result<directory_update> {
      auto i = self->state.entries.find(name);
      if (i == self->state.entries.end())
        return make_error(errc::not_found, "name '" + name + "' is not registered");
      return i->second;
    },
    [=](await_name_atom, const std::string& name, uint64_t min_inc,
        caf::timespan budget) -> caf::result<caf::actor> {
      auto rp = self->make_response_promise<caf::actor>();
      wait_for(self, name, min_inc, budget, [rp](caf::expected<directory_update> e) mutable {
        if (e)
          rp.deliver(e->handle);
        else
          rp.deliver(e.error());
      });
      return rp;
    },
    [=](watch_atom, const std::string& name) { watch(self, name); },
    [=](unwatch_atom, const std::string& name) {
      drop_watcher(self->state.watchers[name],
                   caf::actor_cast<caf::actor_addr>(self->current_sender()));
    },
    [=](call_atom, std::string& name, caf::timespan budget, caf::message& msg) {
      auto id = self->state.next_id++;
      auto rp = self->make_response_promise();
      self->state.calls.emplace(id, rp);
      attempt_call(self, id, std::move(name), 0, steady::now() + budget, std::move(msg), false);
      return rp;
    },
    [=](wait_expired_atom, uint64_t id) {
      auto& st = self->state;
      auto i = st.waiters.find(id);
      if (i == st.waiters.end())
        return;
      auto resume = std::move(i->second.resume);
      auto why = still_waiting(i->second.name, st);
      st.waiters.erase(i);
      resume(std::move(why));
    },
  };
}

}  // namespace

caf::actor spawn_directory(caf::actor_system& sys, const caf::actor& owner) {
  return sys.spawn(directory, owner);
}

caf::expected<directory_update> lookup(caf::actor_system& sys, const caf::actor& dir,
                                       const std::string& name, caf::timespan timeout) {
  caf::scoped_actor self{sys};
  caf::expected<directory_update> out{caf::sec::request_timeout};
  self->request(dir, timeout, lookup_atom::value, name)
    .receive([&](directory_update& u) { out = std::move(u); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

caf::expected<caf::actor> await_name(caf::actor_system& sys, const caf::actor& dir,
                                     const std::string& name, uint64_t min_incarnation,
                                     caf::timespan timeout) {
  caf::scoped_actor self{sys};
  caf::expected<caf::actor> out{caf::sec::request_timeout};
  // The directory answers within `timeout`; the extra second only covers a
  // directory that died (its own request timeout would otherwise race ours).
  self->request(dir, timeout + std::chrono::seconds(1), await_name_atom::value, name,
                min_incarnation, timeout)
    .receive([&](caf::actor& a) { out = std::move(a); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

}  // namespace keel::supervision
