// The cluster's moves and drains as a plan on its own (no actors, no
// nodes): which move runs next, when it has settled, which drains begin,
// wait or are refused, and when a drained node is let go.
#include <algorithm>

#include <doctest/doctest.h>

#include "actors/cluster/move_plan.hpp"

using namespace keel;

namespace {

// Shard s on node s mod n, worker w on node (shards + w) mod n, each shard
// weighing `bytes`, as a job's first start places them; one plan entry a node.
struct cluster {
  placement_policy policy;
  move_plan plan;

  cluster(uint32_t nodes, uint32_t shards, uint32_t workers, uint64_t bytes = 1000) : policy(nodes) {
    for (uint32_t i = 0; i < nodes; ++i)
      plan.add_node();
    for (uint32_t s = 0; s < shards; ++s) {
      policy.estimate(actor_id::shard(s), bytes);
      policy.place(actor_id::shard(s), s % nodes);
    }
    for (uint32_t w = 0; w < workers; ++w)
      policy.place(actor_id::worker(w), (shards + w) % nodes);
  }

  // What the placement does when the job restarts a stopped child: the
  // pinned node if it takes it, else the policy's best candidate.
  uint32_t restart(actor_id child) {
    auto order = policy.candidates(child, 2, child.index);
    REQUIRE(!order.empty());
    auto to = order.front();
    if (auto pin = plan.pin_of(child); pin && std::count(order.begin(), order.end(), *pin))
      to = *pin;
    policy.place(child, to);
    return to;
  }

  // Carries out every move (each stopped at step 0, restarted, settled);
  // returns the moved children in order and the step that ended the queue.
  std::vector<actor_id> carry_out(next_step& last) {
    std::vector<actor_id> moved;
    for (;;) {
      last = plan.next(policy);
      if (!last.move)
        return moved;
      auto child = last.move->child;
      moved.push_back(child);
      CHECK_FALSE(plan.stopped(child, 0));  // not started again yet
      restart(child);
      CHECK(plan.started(child) == last.move->why);
      CHECK(plan.settle());
    }
  }
};

}  // namespace

TEST_CASE("an operator's move is queued, runs next and pins the restart to its target") {
  cluster c(3, 3, 0);
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(0), 2));
  CHECK(c.plan.queued() == 1);
  auto step = c.plan.next(c.policy);
  REQUIRE(step.move);
  CHECK(step.move->child == actor_id::shard(0));
  CHECK(step.move->to == 2u);
  CHECK(step.move->why == "requested by an operator, to node:2");
  CHECK(c.plan.moving() == actor_id::shard(0));
  CHECK(c.plan.pin_of(actor_id::shard(0)) == 2u);
  CHECK(c.restart(actor_id::shard(0)) == 2u);
}

TEST_CASE("an operator's move is refused, saying why, when its target takes no children or it is there") {
  cluster c(3, 3, 0);
  c.policy.set_alive(1, false);
  auto lost = c.plan.request_move(c.policy, actor_id::shard(0), 1);
  REQUIRE(lost);
  CHECK(*lost == "node:1 takes no children now (lost)");
  auto there = c.plan.request_move(c.policy, actor_id::shard(2), 2);
  REQUIRE(there);
  CHECK(*there == "shard:2 runs on node:2 already");
  auto unknown = c.plan.request_move(c.policy, actor_id::shard(0), 7);
  REQUIRE(unknown);
  CHECK(*unknown == "node:7 is not a node of this job (any more)");
  CHECK(c.plan.queued() == 0);
}

TEST_CASE("a queued move that no longer applies is skipped: its child's node was lost") {
  cluster c(3, 3, 0);
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(0), 2));
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(1), 2));
  c.policy.set_alive(0, false);  // shard:0 restarts by the policy anyway
  auto step = c.plan.next(c.policy);
  REQUIRE(step.move);
  CHECK(step.move->child == actor_id::shard(1));
}

TEST_CASE("a move ends only once its child started again and a checkpoint at or past its stop step committed") {
  cluster c(3, 3, 0);
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(0), 2));
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(1), 2));
  REQUIRE(c.plan.next(c.policy).move);
  CHECK_FALSE(c.plan.stopped(actor_id::shard(0), 40));
  c.restart(actor_id::shard(0));
  CHECK(c.plan.started(actor_id::shard(0)));
  CHECK_FALSE(c.plan.settle());
  CHECK_FALSE(c.plan.next(c.policy).move);  // one move at a time
  c.plan.committed(39);
  CHECK_FALSE(c.plan.settle());
  c.plan.committed(40);
  CHECK(c.plan.settle());
  auto step = c.plan.next(c.policy);
  REQUIRE(step.move);
  CHECK(step.move->child == actor_id::shard(1));
}

TEST_CASE("a move the job did not carry out is dropped, unpinning its child, and the next one runs") {
  cluster c(3, 3, 0);
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(0), 2));
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(1), 2));
  REQUIRE(c.plan.next(c.policy).move);
  c.plan.not_stopped(actor_id::shard(0));
  CHECK_FALSE(c.plan.moving());
  CHECK_FALSE(c.plan.pin_of(actor_id::shard(0)));
  auto step = c.plan.next(c.policy);
  REQUIRE(step.move);
  CHECK(step.move->child == actor_id::shard(1));
}

TEST_CASE("a drain moves the node's shards first, then its workers, and releases the node once empty") {
  cluster c(3, 3, 3);  // node:0 runs shard:0 and worker:0
  auto d = c.plan.drain(c.policy, 0);
  CHECK(d.what == drain_decision::outcome::begun);
  CHECK(c.policy.draining(0));
  next_step last;
  auto moved = c.carry_out(last);
  REQUIRE(moved.size() >= 2);
  CHECK(moved[0] == actor_id::shard(0));
  CHECK(moved[1] == actor_id::worker(0));
  CHECK(c.policy.children_of(0).empty());
  CHECK(last.released == std::vector<uint32_t>{0});
  CHECK(c.plan.released(0));
  CHECK_FALSE(c.policy.alive(0));
  CHECK(last.balanced.find("node:1") != std::string::npos);
  CHECK(last.balanced.find("node:0") == std::string::npos);
}

TEST_CASE("a drain with no other node live waits for one, and begins when one comes back") {
  cluster c(2, 2, 0);
  c.policy.set_alive(1, false);
  CHECK(c.plan.drain(c.policy, 0).what == drain_decision::outcome::waiting);
  CHECK(c.plan.drain_waits(0));
  CHECK_FALSE(c.policy.draining(0));
  CHECK(c.plan.resume_drains(c.policy).empty());
  c.policy.set_alive(1, true);
  CHECK(c.plan.resume_drains(c.policy) == std::vector<uint32_t>{0});
  CHECK(c.policy.draining(0));
  CHECK_FALSE(c.plan.drain_waits(0));
  CHECK(c.plan.queued() > 0);
}

TEST_CASE("a drain is refused, saying why, with no other node that may take children, or twice") {
  cluster c(2, 2, 0);
  CHECK(c.plan.drain(c.policy, 1).what == drain_decision::outcome::begun);
  auto again = c.plan.drain(c.policy, 1);
  CHECK(again.what == drain_decision::outcome::refused);
  CHECK(again.why == "node:1 is draining already");
  auto last = c.plan.drain(c.policy, 0);
  CHECK(last.what == drain_decision::outcome::refused);
  CHECK(last.why == "cannot drain node:0: no other live node to move its children to");
}

TEST_CASE("a drain is refused when the other nodes have too few free worker slots for its workers") {
  cluster c(2, 0, 4);  // two workers on each node
  c.policy.set_worker_slots(3);
  auto d = c.plan.drain(c.policy, 0);
  CHECK(d.what == drain_decision::outcome::refused);
  CHECK(d.why.find("it runs 2 workers and the other live nodes have 1 free worker slot") != std::string::npos);
}

TEST_CASE("after moves the queue plans one more balancing pass, then reports the loads once") {
  cluster c(3, 6, 0);
  auto plan = c.plan.queue_rebalance(c.policy);
  CHECK(plan.empty());  // balanced already
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(0), 1));
  CHECK_FALSE(c.plan.request_move(c.policy, actor_id::shard(3), 1));  // node:0 empty, node:1 holds four
  next_step last;
  auto moved = c.carry_out(last);
  REQUIRE(moved.size() >= 4);  // the two asked for, then the balancing pass's
  CHECK(moved[0] == actor_id::shard(0));
  CHECK(moved[1] == actor_id::shard(3));
  CHECK(c.policy.load(0).shards == 2);
  CHECK(c.policy.load(1).shards == 2);
  CHECK_FALSE(last.balanced.empty());
  CHECK(c.plan.next(c.policy).balanced.empty());  // said once
}
