// Fencing of shard incarnations (actors/ps/parameter_shard.hpp): a shard
// incarnation the job has replaced (a zombie: its process was cut off,
// its shard restarted elsewhere, and the partition healed) never applies
// or acknowledges another push, and stops once it learns it was replaced.
// Each zombie here is an old incarnation kept running beside its successor.
#include <optional>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "messages/errors.hpp"
#include "two_param_shard.hpp"

using namespace keel;
using namespace std::chrono_literals;
using Status = schema::PushAck::Status;

namespace {

// The answer to `m` from `to`: the ack, or the error instead.
struct answer {
  std::optional<push_ack_msg> ack;
  caf::error error;
};

answer push_to(caf::actor_system& sys, const caf::actor& to, const push_msg& m) {
  caf::scoped_actor self{sys};
  answer out;
  self->request(to, 10s, m).receive([&](const push_ack_msg& a) { out.ack = a; },
                                    [&](caf::error& e) { out.error = e; });
  return out;
}

// Waits (10 s at most) for `who` to be down; its exit reason, or none.
std::optional<caf::error> down_reason(caf::actor_system& sys, const caf::actor& who) {
  caf::scoped_actor self{sys};
  self->monitor(who);
  std::optional<caf::error> out;
  self->receive([&](const caf::down_msg& dm) { out = dm.reason; },
                caf::after(10s) >> [] {});
  return out;
}

}  // namespace

TEST_CASE("a zombie shard incarnation refuses a push for its successor, applies nothing and stops") {
  test::two_param_shard f(1);       // the old incarnation, epoch 1
  auto successor = f.spawn(2);      // the job restarted it as epoch 2
  // Its own epoch's push is still applied (it has not learned yet).
  auto own = push_to(*f.sys, f.shard, test::two_param_push(0, 1, -1.0f, 1));
  REQUIRE(own.ack);
  CHECK(decode(*own.ack)->root().getShardEpoch() == 1);
  CHECK(f.param0() == 1.0f);
  // A worker that knows epoch 2 reaches the zombie: refused, not applied.
  auto stale = push_to(*f.sys, f.shard, test::two_param_push(0, 2, -1.0f, 2));
  CHECK_FALSE(stale.ack);
  CHECK(is(stale.error, errc::stale_incarnation));
  CHECK(describe(stale.error).find("epoch 1 refused a message for epoch 2") != std::string::npos);
  // It learned it was replaced: it stops, and nothing reaches it again.
  auto reason = down_reason(*f.sys, f.shard);
  REQUIRE(reason);
  CHECK(is(*reason, errc::stale_incarnation));
  auto later = push_to(*f.sys, f.shard, test::two_param_push(0, 2, -1.0f, 1));
  CHECK_FALSE(later.ack);
  // The successor took neither push.
  CHECK(f.param0(successor) == 0.0f);
  caf::anon_send_exit(successor, caf::exit_reason::user_shutdown);
}

TEST_CASE("a shard refuses a push addressed to the incarnation it replaced, and keeps serving") {
  test::two_param_shard f(2);
  auto old = push_to(*f.sys, f.shard, test::two_param_push(0, 1, -1.0f, 1));
  CHECK_FALSE(old.ack);
  CHECK(is(old.error, errc::stale_incarnation));
  CHECK(f.param0() == 0.0f);
  auto ok = push_to(*f.sys, f.shard, test::two_param_push(0, 1, -1.0f, 2));
  REQUIRE(ok.ack);
  CHECK(decode(*ok.ack)->root().getStatus() == Status::APPLIED);
  CHECK(decode(*ok.ack)->root().getShardEpoch() == 2);
  CHECK(f.param0() == 1.0f);
}

TEST_CASE("a zombie shard incarnation that a worker fences stops before another push") {
  test::two_param_shard f(3);
  caf::anon_send(f.shard, fence_atom::value, uint64_t{4});
  auto reason = down_reason(*f.sys, f.shard);
  REQUIRE(reason);
  CHECK(is(*reason, errc::stale_incarnation));
  auto after = push_to(*f.sys, f.shard, test::two_param_push(0, 1, -1.0f, 3));
  CHECK_FALSE(after.ack);
}

TEST_CASE("a fence naming an older or the same epoch leaves the shard running") {
  test::two_param_shard f(5);
  caf::anon_send(f.shard, fence_atom::value, uint64_t{4});
  caf::anon_send(f.shard, fence_atom::value, uint64_t{5});
  auto ok = push_to(*f.sys, f.shard, test::two_param_push(0, 1, -1.0f, 5));
  CHECK(ok.ack);
}

TEST_CASE("a zombie shard incarnation refuses a pull for its successor and stops") {
  test::two_param_shard f(1);
  auto req = build<schema::PullRequest>(64, [](schema::PullRequest::Builder b) {
    b.setWorker(0);
    b.setShardEpoch(2);
    auto r = b.initDense(1)[0];
    r.setBegin(0);
    r.setEnd(2);
  });
  caf::scoped_actor self{*f.sys};
  bool refused = false;
  self->request(f.shard, 10s, req).receive([&](const pull_reply_msg&) {},
                                           [&](caf::error& e) { refused = is(e, errc::stale_incarnation); });
  CHECK(refused);
  CHECK(down_reason(*f.sys, f.shard));
}
