#pragma once
// The CAF side of request_deadlines (actors/core/request_deadlines.hpp):
// `timed_request` makes a request with no CAF timeout (caf::infinite),
// records its deadline and arms the actor's one timer when needed, and the
// actor's handler for deadline_atom calls `expire_due`, which delivers CAF's
// own request_timeout error to each due request. The response handler's error
// path then runs and CAF drops the handler, as when CAF's clock times a
// request out. For .cpp files of actors that already include CAF.

#include <caf/all.hpp>
#include <chrono>

#include "actors/core/atoms.hpp"
#include "actors/core/request_deadlines.hpp"

namespace keel {

template <class Self>
void arm_deadline_timer(Self* self, request_deadlines::time_point at) {
  auto now = request_deadlines::clock_type::now();
  self->delayed_send(self, at > now ? at - now : request_deadlines::clock_type::duration::zero(),
                     deadline_atom::value);
}

// Sends `xs` to `dest` as a request timed by `d` (due `timeout` from now),
// with `on_reply(const Reply&)` and `on_error(caf::error&)` as its handlers;
// a timeout reaches `on_error` as CAF's request_timeout. `d` belongs to the
// actor's state, so it outlives every handler.
template <class Reply, class Self, class OnReply, class OnError, class... Ts>
void timed_request(Self* self, request_deadlines& d, std::chrono::milliseconds timeout,
                   const caf::actor& dest, OnReply on_reply, OnError on_error, Ts&&... xs) {
  auto h = self->request(dest, caf::infinite, std::forward<Ts>(xs)...);
  auto id = h.id().integer_value();
  if (auto at = d.add(id, request_deadlines::clock_type::now() + timeout))
    arm_deadline_timer(self, *at);
  h.then(
    [&d, id, on_reply = std::move(on_reply)](const Reply& r) {
      d.answered(id);
      on_reply(r);
    },
    [&d, id, on_error = std::move(on_error)](caf::error& err) {
      d.answered(id);
      on_error(err);
    });
}

// The actor's deadline timer fired.
template <class Self>
void expire_due(Self* self, request_deadlines& d) {
  std::optional<request_deadlines::time_point> rearm;
  for (auto id : d.fire(request_deadlines::clock_type::now(), &rearm))
    self->eq_impl(caf::message_id(id), self->ctrl(), self->context(),
                  caf::make_error(caf::sec::request_timeout));
  if (rearm)
    arm_deadline_timer(self, *rearm);
}

}  // namespace keel
