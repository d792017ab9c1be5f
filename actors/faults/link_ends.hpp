#pragma once
// link_ends is one actor's end of its links (actors/faults/link_faults.hpp
// names them): the decorator the parameter shard and the worker receive
// their requests and updates through and send their answers through, so
// their own handlers read as the protocol (a push is applied and acked, a
// pull is answered when the rule allows) and the job's message faults act
// here. A message crossing a link is counted on it and meets the armed
// fault that matches it: it is delivered, dropped, duplicated, delayed or
// reordered (held_deliveries, actors/faults/link_hold.hpp, carries that
// out), and the actor's handler runs when, and as often as, the link
// delivers it. Made without link faults (the default, or a null
// link_faults) every call hands its message straight to the handler and
// its answer straight back: no counting, no strings, no allocation. An actor
// with link faults routes (link_release_atom, id) to release(). Not
// thread-safe: it lives in one actor's state, and the `self` passed to its
// calls is that actor.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/result.hpp>
#include <caf/typed_response_promise.hpp>

#include "actors/faults/link_faults.hpp"
#include "actors/faults/link_hold.hpp"
#include "messages/decode.hpp"
#include "messages/protocol.hpp"

namespace keel {

// The requests that cross a link from a numbered peer (the worker a message
// names) and the answers that cross back.
template <class S>
struct link_request;
template <>
struct link_request<schema::Push> {
  using answer = push_ack_msg;
  static constexpr msg_kind in = msg_kind::push;
  static constexpr msg_kind out = msg_kind::ack;
};
template <>
struct link_request<schema::PullRequest> {
  using answer = pull_reply_msg;
  static constexpr msg_kind in = msg_kind::pull;
  static constexpr msg_kind out = msg_kind::reply;
};

// The way back of one request: its promise, the peer it answers, and the
// kind of the answer on the link.
template <class Reply>
struct reply_to {
  caf::typed_response_promise<Reply> promise;
  uint32_t peer = 0;
  msg_kind kind = msg_kind::reply;

  // Answers with an error, which no link fault touches.
  void fail(caf::error err) { promise.deliver(std::move(err)); }
};

class link_ends {
 public:
  // No link faults: every message is delivered at once.
  link_ends() = default;
  // This actor is `me` ("shard:0"); its requests come from `peers` numbered
  // peers named `peer_kind` + index ("worker:"), if any. `faults` may be
  // null.
  link_ends(std::shared_ptr<link_faults> faults, std::string me,
            const std::string& peer_kind = {}, uint32_t peers = 0);

  // Receives request `m` from the peer it names and returns its answer,
  // `handle(decoded<S>)`, over the link back. A request that does not
  // decode is answered with the error and crosses no link.
  template <class Self, class S, class Handle>
  caf::result<typename link_request<S>::answer> request(Self* self, const msg<S>& m,
                                                        Handle handle);

  // The same for a request answered later: `handle(decoded<S>, reply_to)`
  // keeps the reply_to and calls answer() when it can.
  template <class Self, class S, class Handle>
  caf::result<typename link_request<S>::answer> request_later(Self* self, const msg<S>& m,
                                                              Handle handle);

  // Sends `reply` to the requester over the link back.
  template <class Self, class Reply>
  void answer(Self* self, reply_to<Reply>& to, Reply reply);
  // The same for a handler that may refuse: its error goes back unanswered
  // by any link fault (a refusal is not a message the link carries).
  template <class Self, class Reply>
  void answer(Self* self, reply_to<Reply>& to, caf::expected<Reply> reply) {
    if (!reply)
      return to.fail(reply.error());
    answer(self, to, std::move(*reply));
  }

  // Runs `deliver` as a message of `kind` from numbered peer `peer`, or from
  // the actor named `from`, arrives over the link to this actor.
  template <class Self, class Deliver>
  void receive(Self* self, uint32_t peer, msg_kind kind, Deliver deliver);
  template <class Self, class Deliver>
  void receive(Self* self, const std::string& from, msg_kind kind, Deliver deliver);

  // Sends `m` (of `kind`) to `dest`, the actor named `to`, over the link.
  template <class Self, class M>
  void send(Self* self, const std::string& to, const caf::actor& dest, msg_kind kind, M m);

  // Runs the delivery held under `id` (its link_release_atom arrived).
  void release(uint64_t id) { held_.release(id); }

 private:
  struct peer_link {
    std::string name, in, out;  // "worker:1", "worker:1>shard:0", "shard:0>worker:1"
  };
  // The links to and from `peer`; one outside 0..peers-1 (bad input the
  // handler refuses) is made in `stray`.
  const peer_link& link_of(uint32_t peer, peer_link& stray) const;

  template <class Self, class S, class Handle>
  void late_request(Self* self, const msg<S>& m, reply_to<typename link_request<S>::answer>* to,
                    Handle& handle);

  std::shared_ptr<link_faults> faults_;
  std::string me_;
  std::string peer_kind_;
  std::vector<peer_link> peers_;
  held_deliveries held_;
};

// --- the templates' bodies -------------------------------------------------

template <class Self, class S, class Handle>
caf::result<typename link_request<S>::answer> link_ends::request(Self* self, const msg<S>& m,
                                                                 Handle handle) {
  using answer_t = typename link_request<S>::answer;
  auto d = decode(m);
  if (!d)
    return d.error();
  if (!faults_)
    return handle(std::move(*d));
  auto peer = d->root().getWorker();
  peer_link stray;
  const auto& link = link_of(peer, stray);
  auto in = faults_->on_message(link.name, me_, link_request<S>::in);
  reply_to<answer_t> to{self->template make_response_promise<answer_t>(), peer,
                        link_request<S>::out};
  if (in.action == send_action::deliver) {
    auto reply = handle(std::move(*d));
    // Requests reordered behind this one are handled before it is answered.
    held_.delivered(link.in);
    answer(self, to, std::move(reply));
    return to.promise;
  }
  // A doubled request is handled, then its copy twice: once answered again
  // and once unanswered. (So the shard has always treated a doubled push;
  // the answers after the first are dropped by CAF, which keeps one
  // response per request.)
  held_.apply(
    self, in, link.in, [this, self, m, to, handle]() mutable { late_request(self, m, &to, handle); },
    [this, self, m, to, handle]() mutable {
      late_request(self, m, &to, handle);
      late_request(self, m, nullptr, handle);
    });
  return to.promise;
}

template <class Self, class S, class Handle>
void link_ends::late_request(Self* self, const msg<S>& m,
                             reply_to<typename link_request<S>::answer>* to, Handle& handle) {
  auto d = decode(m);
  if (!d) {
    if (to)
      to->fail(d.error());
    return;
  }
  auto reply = handle(std::move(*d));
  if (to)
    answer(self, *to, std::move(reply));
}

template <class Self, class S, class Handle>
caf::result<typename link_request<S>::answer> link_ends::request_later(Self* self,
                                                                       const msg<S>& m,
                                                                       Handle handle) {
  using answer_t = typename link_request<S>::answer;
  auto d = decode(m);
  if (!d)
    return d.error();
  reply_to<answer_t> to{self->template make_response_promise<answer_t>(), d->root().getWorker(),
                        link_request<S>::out};
  if (!faults_) {
    handle(std::move(*d), to);
    return to.promise;
  }
  peer_link stray;
  const auto& link = link_of(to.peer, stray);
  auto in = faults_->on_message(link.name, me_, link_request<S>::in);
  if (in.action == send_action::deliver) {
    handle(std::move(*d), to);
    held_.delivered(link.in);
    return to.promise;
  }
  // A held request is decoded again when it arrives; a doubled one is
  // handled twice with one promise, so answered once (CAF keeps one
  // response per request).
  held_.apply(self, in, link.in, [self, m, to, handle]() mutable {
    auto again = decode(m);
    if (!again)
      return to.fail(again.error());
    handle(std::move(*again), to);
  });
  return to.promise;
}

template <class Self, class Reply>
void link_ends::answer(Self* self, reply_to<Reply>& to, Reply reply) {
  if (!faults_) {
    to.promise.deliver(std::move(reply));
    return;
  }
  peer_link stray;
  const auto& link = link_of(to.peer, stray);
  auto out = faults_->on_message(me_, link.name, to.kind);
  if (out.action == send_action::deliver) {
    to.promise.deliver(std::move(reply));
    held_.delivered(link.out);
    return;
  }
  // A doubled answer is delivered twice as the response to its request;
  // the requester's CAF takes the first.
  auto deliver = [rp = to.promise, reply]() mutable { rp.deliver(reply); };
  held_.apply(self, out, link.out, deliver, deliver);
}

template <class Self, class Deliver>
void link_ends::receive(Self* self, uint32_t peer, msg_kind kind, Deliver deliver) {
  if (!faults_)
    return deliver();
  peer_link stray;
  const auto& link = link_of(peer, stray);
  held_.apply(self, faults_->on_message(link.name, me_, kind), link.in, std::move(deliver));
}

template <class Self, class Deliver>
void link_ends::receive(Self* self, const std::string& from, msg_kind kind, Deliver deliver) {
  if (!faults_)
    return deliver();
  held_.apply(self, faults_->on_message(from, me_, kind), from + ">" + me_, std::move(deliver));
}

template <class Self, class M>
void link_ends::send(Self* self, const std::string& to, const caf::actor& dest, msg_kind kind,
                     M m) {
  if (!faults_)
    return self->send(dest, std::move(m));
  held_.apply(self, faults_->on_message(me_, to, kind), me_ + ">" + to,
              [self, dest, m] { self->send(dest, m); });
}

}  // namespace keel
