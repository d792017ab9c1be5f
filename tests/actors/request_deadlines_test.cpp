// request_deadlines (the plain bookkeeping) and request_timer (its CAF side):
// a request timed by the actor's own timer fails with CAF's request_timeout
// when it is due, and its handler is gone afterwards, as with CAF's timeouts.
#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <string>

#include "actors/core/request_timer.hpp"

using namespace keel;
using namespace std::chrono_literals;

namespace {

const auto t0 = request_deadlines::clock_type::now();

std::vector<uint64_t> fire(request_deadlines& d, std::chrono::milliseconds at,
                           std::optional<request_deadlines::time_point>* rearm) {
  return d.fire(t0 + at, rearm);
}

}  // namespace

TEST_CASE("request deadlines arm one timer for the earliest due request") {
  request_deadlines d;
  auto first = d.add(1, t0 + 100ms);
  REQUIRE(first);
  CHECK(*first == t0 + 100ms);
  CHECK_FALSE(d.add(2, t0 + 150ms));  // the armed timer fires first
  CHECK_FALSE(d.add(3, t0 + 100ms));
  auto earlier = d.add(4, t0 + 50ms);  // due before the armed timer
  REQUIRE(earlier);
  CHECK(*earlier == t0 + 50ms);
  CHECK(d.open() == 4);
}

TEST_CASE("request deadlines fire the due requests in the order added and rearm for the next") {
  request_deadlines d;
  d.add(7, t0 + 100ms);
  d.add(8, t0 + 120ms);
  d.add(9, t0 + 100ms);
  d.add(10, t0 + 300ms);
  d.answered(8);
  d.answered(99);  // unknown: ignored
  std::optional<request_deadlines::time_point> rearm;
  CHECK(fire(d, 100ms, &rearm) == std::vector<uint64_t>{7, 9});
  REQUIRE(rearm);
  CHECK(*rearm == t0 + 300ms);
  CHECK(d.open() == 1);
  CHECK(fire(d, 300ms, &rearm) == std::vector<uint64_t>{10});
  CHECK_FALSE(rearm);  // nothing open: no timer
  CHECK(d.open() == 0);
  auto again = d.add(11, t0 + 400ms);  // the timer is armed anew
  REQUIRE(again);
  CHECK(*again == t0 + 400ms);
}

TEST_CASE("request deadlines answered before they are due never fire") {
  request_deadlines d;
  d.add(1, t0 + 100ms);
  d.add(2, t0 + 100ms);
  d.answered(2);
  d.answered(1);
  std::optional<request_deadlines::time_point> rearm = t0;
  CHECK(fire(d, 200ms, &rearm).empty());
  CHECK_FALSE(rearm);
}

TEST_CASE("a timer that fires before the one still armed for the next due arms no other") {
  request_deadlines d;
  d.add(1, t0 + 100ms);  // timer armed for 100 ms
  std::optional<request_deadlines::time_point> rearm;
  // A superseded timer, armed earlier for an answered request, fires at 40.
  CHECK(fire(d, 40ms, &rearm).empty());
  CHECK_FALSE(rearm);  // the 100 ms timer is still out and serves
  CHECK(fire(d, 100ms, &rearm) == std::vector<uint64_t>{1});
  CHECK_FALSE(rearm);
}

namespace {

using hold_atom = caf::atom_constant<caf::atom("hold")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using marker_atom = caf::atom_constant<caf::atom("marker")>;

// Holds every request unanswered until released (and tells `watcher` it
// holds one); then answers it and sends the requester a marker right behind
// the answer.
caf::behavior silent(caf::stateful_actor<std::vector<caf::response_promise>>* self,
                     caf::actor watcher) {
  return {
    [self, watcher](hold_atom) {
      self->state.push_back(self->make_response_promise());
      self->send(watcher, std::string("held"));
      return caf::delegated<std::string>{};
    },
    [self](release_atom, const caf::actor& requester) {
      for (auto& p : self->state) p.deliver(std::string("late answer"));
      self->state.clear();
      self->send(requester, marker_atom::value);
    },
  };
}

struct requester_state {
  request_deadlines deadlines;
  caf::actor report_to;
};

// Asks `dest` once, timed by request_deadlines (timed_request); tells `report_to` what the
// request's handlers saw: "timeout", "answer: ..." or, on the marker, "marker".
caf::behavior requester(caf::stateful_actor<requester_state>* self, caf::actor dest,
                        caf::actor report_to, std::chrono::milliseconds timeout) {
  self->state.report_to = report_to;
  timed_request<std::string>(
    self, self->state.deadlines, timeout, dest,
    [self](const std::string& s) { self->send(self->state.report_to, "answer: " + s); },
    [self](caf::error& e) {
      self->send(self->state.report_to, e == caf::sec::request_timeout ? std::string("timeout")
                                                                      : self->system().render(e));
    },
    hold_atom::value);
  return {
    [self](deadline_atom) { expire_due(self, self->state.deadlines); },
    [self](marker_atom) { self->send(self->state.report_to, std::string("marker")); },
  };
}

}  // namespace

TEST_CASE("a request timed by the actor's own timer fails with CAF's request_timeout") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto dest = sys.spawn(silent, caf::actor{self});
  auto started = request_deadlines::clock_type::now();
  auto req = sys.spawn(requester, dest, caf::actor{self}, 50ms);
  std::vector<std::string> seen;
  for (int i = 0; i < 2; ++i)
    self->receive([&](const std::string& s) { seen.push_back(s); },
                  caf::after(10s) >> [&] { seen.push_back("nothing"); });
  CHECK(seen == std::vector<std::string>{"held", "timeout"});
  CHECK(request_deadlines::clock_type::now() - started >= 50ms);
  // The handler is gone: the late answer reaches no one, and the marker the
  // silent actor sends right behind it comes next.
  self->send(dest, release_atom::value, req);
  std::string next;
  self->receive([&](const std::string& s) { next = s; }, caf::after(10s) >> [&] { next = "nothing"; });
  CHECK(next == "marker");
  self->send_exit(req, caf::exit_reason::user_shutdown);
  self->send_exit(dest, caf::exit_reason::user_shutdown);
}

TEST_CASE("a request answered in time gets its answer and no timeout") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto dest = sys.spawn(silent, caf::actor{self});
  auto req = sys.spawn(requester, dest, caf::actor{self}, 10s);
  std::vector<std::string> seen;
  auto next = [&] {
    self->receive([&](const std::string& s) { seen.push_back(s); },
                  caf::after(10s) >> [&] { seen.push_back("nothing"); });
  };
  next();  // held
  self->send(dest, release_atom::value, req);
  next();
  next();
  CHECK(seen == std::vector<std::string>{"held", "answer: late answer", "marker"});
  self->send_exit(req, caf::exit_reason::user_shutdown);
  self->send_exit(dest, caf::exit_reason::user_shutdown);
}
