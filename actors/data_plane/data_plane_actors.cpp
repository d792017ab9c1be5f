#include "actors/data_plane/data_plane_impl.hpp"

#include "actors/core/request_timer.hpp"
#include "messages/errors.hpp"

namespace keel::dp_detail {

namespace {

struct forwarder_state {
  std::unordered_map<uint64_t, caf::typed_response_promise<push_ack_msg>> pushes;
  std::unordered_map<uint64_t, caf::typed_response_promise<pull_reply_msg>> pulls;
  uint64_t next_slot = 1;
  std::string closed;  // why, once the connection closed
};

using forwarder_actor = caf::stateful_actor<forwarder_state>;
using impl_ref = std::weak_ptr<data_plane::impl>;

caf::error lost(const std::string& peer, const std::string& why) {
  return make_error(errc::io_error, "data plane to " + peer + ": " + why);
}

// Queues one request on the connection; the slot's promise waits in
// `pending` for the answer. False (and nothing queued) when it is closed.
bool queue_request(forwarder_actor* self, const std::weak_ptr<connection>& wc, const impl_ref& wp, dp::kind k,
                   const caf::actor& dest, const frame_ptr& f, uint64_t& slot) {
  auto c = wc.lock();
  if (!c || !self->state.closed.empty())
    return false;
  slot = self->state.next_slot++;
  if (!c->enqueue(outgoing{dp::header{k, slot, dest.id(), 0}, f, {}}))
    return false;
  if (auto p = wp.lock())
    ++p->requests_out;
  return true;
}

template <class T>
void deliver(std::unordered_map<uint64_t, caf::typed_response_promise<T>>& pending, uint64_t slot, T answer) {
  auto it = pending.find(slot);
  if (it == pending.end())
    return;
  it->second.deliver(std::move(answer));
  pending.erase(it);
}

template <class Map>
bool fail_slot(Map& pending, uint64_t slot, const caf::error& err) {
  auto it = pending.find(slot);
  if (it == pending.end())
    return false;
  it->second.deliver(err);
  pending.erase(it);
  return true;
}

// Queues one request (`what`: "push" or "pull") and returns the promise
// its answer, kept in `pending` under its slot, will fulfil.
template <class Answer>
caf::result<Answer> forward(forwarder_actor* self, const std::weak_ptr<connection>& wc, const impl_ref& wp,
                            const std::string& peer, const char* what, dp::kind k, const caf::actor& dest,
                            const frame_ptr& f,
                            std::unordered_map<uint64_t, caf::typed_response_promise<Answer>>& pending) {
  if (!f || !dest)
    return make_error(errc::invalid_argument, std::string("data plane: an empty ") + what + " or no destination");
  uint64_t slot = 0;
  if (!queue_request(self, wc, wp, k, dest, f, slot))
    return lost(peer, self->state.closed.empty() ? "closed" : self->state.closed);
  auto rp = self->template make_response_promise<Answer>();
  pending.emplace(slot, rp);
  return rp;
}

caf::behavior forwarder(forwarder_actor* self, std::weak_ptr<connection> wc, impl_ref wp, std::string peer) {
  return {
    [=](dp_forward_atom, const caf::actor& dest, const push_msg& m) -> caf::result<push_ack_msg> {
      return forward(self, wc, wp, peer, "push", dp::kind::push, dest, m.frame(), self->state.pushes);
    },
    [=](dp_forward_atom, const caf::actor& dest, const pull_request_msg& m) -> caf::result<pull_reply_msg> {
      return forward(self, wc, wp, peer, "pull", dp::kind::pull, dest, m.frame(), self->state.pulls);
    },
    [=](dp_reply_atom, uint64_t slot, const push_ack_msg& a) { deliver(self->state.pushes, slot, a); },
    [=](dp_reply_atom, uint64_t slot, const pull_reply_msg& r) { deliver(self->state.pulls, slot, r); },
    [=](dp_error_atom, uint64_t slot, const std::string& text) {
      auto err = make_error(errc::io_error, "data plane: " + peer + " answered: " + text);
      if (!fail_slot(self->state.pushes, slot, err))
        fail_slot(self->state.pulls, slot, err);
    },
    [=](dp_closed_atom, const std::string& why) {
      auto& st = self->state;
      st.closed = why;
      auto err = lost(peer, why);
      for (auto& [slot, rp] : st.pushes) rp.deliver(err);
      for (auto& [slot, rp] : st.pulls) rp.deliver(err);
      st.pushes.clear();
      st.pulls.clear();
      self->quit();
    },
  };
}

void answer(const std::weak_ptr<connection>& wc, dp::kind k, uint64_t slot, const frame_ptr& f) {
  if (auto c = wc.lock())
    c->enqueue(outgoing{dp::header{k, slot, 0, 0}, f, {}});
}

void answer_error(const std::weak_ptr<connection>& wc, uint64_t slot, std::string text) {
  if (auto c = wc.lock())
    c->enqueue(outgoing{dp::header{dp::kind::error, slot, 0, 0}, nullptr, std::move(text)});
}

struct gateway_state {
  request_deadlines deadlines;  // of the requests to local shards
};

using gateway_actor = caf::stateful_actor<gateway_state>;

// Asks the local `shard` and queues its answer (or the error) under `slot`.
// Timed by request_deadlines, not CAF's clock: two clock entries a request
// would wake CAF's clock thread twice for every remote push and pull.
template <class Reply, class Msg>
void ask_local(gateway_actor* self, const std::weak_ptr<connection>& wc, std::chrono::milliseconds timeout,
               uint64_t slot, const caf::actor& shard, const Msg& m, dp::kind answer_kind) {
  timed_request<Reply>(
    self, self->state.deadlines, timeout, shard,
    [wc, slot, answer_kind](const Reply& r) { answer(wc, answer_kind, slot, r.frame()); },
    [wc, slot](caf::error& e) { answer_error(wc, slot, describe(e)); }, m);
}

// Makes each request that arrived on an inbound connection to its local
// shard and queues the answer (or the error) on the same connection.
caf::behavior gateway(gateway_actor* self, std::weak_ptr<connection> wc, std::chrono::milliseconds timeout) {
  return {
    [=](dp_request_atom, uint64_t slot, const caf::actor& shard, const push_msg& m) {
      ask_local<push_ack_msg>(self, wc, timeout, slot, shard, m, dp::kind::push_ack);
    },
    [=](dp_request_atom, uint64_t slot, const caf::actor& shard, const pull_request_msg& m) {
      ask_local<pull_reply_msg>(self, wc, timeout, slot, shard, m, dp::kind::pull_reply);
    },
    [=](deadline_atom) { expire_due(self, self->state.deadlines); },
    // A duplicating link's second copy of an answer comes as a plain
    // message; the worker has the first.
    [](const push_ack_msg&) {},
    [](const pull_reply_msg&) {},
  };
}

}  // namespace

caf::actor spawn_forwarder(caf::actor_system& sys, std::weak_ptr<connection> c,
                           std::weak_ptr<data_plane::impl> owner, std::string peer) {
  return sys.spawn(forwarder, std::move(c), std::move(owner), std::move(peer));
}

caf::actor spawn_gateway(caf::actor_system& sys, std::weak_ptr<connection> c, std::chrono::milliseconds timeout) {
  return sys.spawn(gateway, std::move(c), timeout);
}

}  // namespace keel::dp_detail
