// The cluster's placement policy on its own: first starts keep the
// index layout, a dead node's children spread over the survivors by load
// (shards by bytes, workers by count), the node a child ran on comes last,
// and committed bytes outweigh the config's estimate.
#include <algorithm>

#include <doctest/doctest.h>

#include "actors/cluster/placement_policy.hpp"

using namespace keel;

namespace {

// Places shard s on node s mod n and worker w on node (shards + w) mod n,
// each shard weighing `bytes`, as a job's first start does.
placement_policy started(uint32_t nodes, uint32_t shards, uint32_t workers, uint64_t bytes) {
  placement_policy p(nodes);
  for (uint32_t s = 0; s < shards; ++s) {
    p.estimate(actor_id::shard(s), bytes);
    auto order = p.candidates(actor_id::shard(s), 1, s);
    REQUIRE(!order.empty());
    CHECK(order.front() == s % nodes);
    p.place(actor_id::shard(s), order.front());
  }
  for (uint32_t w = 0; w < workers; ++w) {
    auto order = p.candidates(actor_id::worker(w), 1, shards + w);
    REQUIRE(!order.empty());
    CHECK(order.front() == (shards + w) % nodes);
    p.place(actor_id::worker(w), order.front());
  }
  return p;
}

// Restarts every child of `node` (marked dead), shards first, each on the
// best candidate, as the supervisors do after the node's death.
void lose(placement_policy& p, uint32_t node) {
  p.set_alive(node, false);
  for (auto child : p.children_of(node)) {
    auto order = p.candidates(child, 2, 0);
    REQUIRE(!order.empty());
    CHECK(order.front() != node);
    p.place(child, order.front());
  }
}

}  // namespace

TEST_CASE("a dead node's shards and workers spread over the survivors, not onto the next node") {
  // 4 nodes, 8 shards and 4 workers: each node has 2 shards and 1 worker.
  auto p = started(4, 8, 4, 100);
  for (uint32_t n = 0; n < 4; ++n) {
    CHECK(p.load(n).shards == 2);
    CHECK(p.load(n).workers == 1);
  }
  lose(p, 1);
  CHECK(p.load(1).children() == 0);
  // Its 2 shards went to two different survivors, its worker to the third.
  uint32_t most_shards = 0;
  for (uint32_t n : {0u, 2u, 3u}) {
    most_shards = std::max(most_shards, p.load(n).shards);
    CHECK(p.load(n).children() == 4);
  }
  CHECK(most_shards == 3);
  lose(p, 2);
  // 8 shards over 2 nodes, 4 workers over 2 nodes: even.
  for (uint32_t n : {0u, 3u}) {
    CHECK(p.load(n).shards == 4);
    CHECK(p.load(n).workers == 2);
    CHECK(p.load(n).shard_bytes == 400);
  }
}

TEST_CASE("shards balance by bytes: a restarted shard goes where the fewest shard bytes are, workers by count") {
  auto p = started(3, 3, 3, 100);
  p.weigh(actor_id::shard(0), 1000);  // node 0 holds a heavy shard
  p.set_alive(2, false);
  auto order = p.candidates(actor_id::shard(2), 2, 0);
  REQUIRE(order.size() == 2);
  CHECK(order.front() == 1);  // 100 bytes against 1000
  p.place(actor_id::shard(2), 1);
  // The worker of node 2 goes by workers hosted (1 each), then shard bytes:
  // node 0 holds 1000, node 1 now 200.
  order = p.candidates(actor_id::worker(2), 2, 0);
  REQUIRE(!order.empty());
  CHECK(order.front() == 1);
  // Committed bytes replace the estimate; an estimate never overrides them.
  p.estimate(actor_id::shard(0), 5);
  CHECK(p.load(0).shard_bytes == 1000);
}

TEST_CASE("a child restarted while its node lives goes elsewhere first and back to its node last") {
  auto p = started(3, 3, 0, 100);
  auto order = p.candidates(actor_id::shard(1), 2, 1);
  REQUIRE(order.size() == 3);
  CHECK(order.back() == 1);  // may have died unseen
  // Its own bytes leave node 1, so the ties between 0 and 2 go round from 1.
  CHECK(order.front() == 2);
}

TEST_CASE("a first start whose preferred node is dead goes to the least loaded live node, and with no live node there is no candidate") {
  auto p = started(3, 3, 0, 100);
  p.set_alive(1, false);
  p.place(actor_id::shard(0), 0);
  auto order = p.candidates(actor_id::shard(5), 1, 1);
  REQUIRE(order.size() == 2);
  CHECK(order.front() != 1);
  p.set_alive(0, false);
  p.set_alive(2, false);
  CHECK(p.candidates(actor_id::shard(5), 1, 0).empty());
  CHECK(p.candidates(actor_id::worker(0), 3, 0).empty());
}

TEST_CASE("a shard's estimate counts its values and their optimizer slots, 4 bytes each") {
  CHECK(estimated_shard_bytes(1000, 0) == 4000);
  CHECK(estimated_shard_bytes(1000, 2) == 12000);
}

TEST_CASE("a few bytes more do not outweigh a child more: shard bytes count in quarters of a mean shard") {
  // Node 0's shard weighs 1000, node 2's 1010: the restarted shard of node
  // 1 goes by children, to node 2, which lacks the worker node 0 now has.
  auto p = started(3, 3, 0, 1000);
  p.weigh(actor_id::shard(2), 1010);
  p.place(actor_id::worker(0), 0);
  p.set_alive(1, false);
  auto order = p.candidates(actor_id::shard(1), 2, 1);
  REQUIRE(order.size() == 2);
  CHECK(order.front() == 2);
  // Nor in other buckets: 990 against 1010 (quarters of 250).
  p.weigh(actor_id::shard(0), 990);
  CHECK(p.candidates(actor_id::shard(1), 2, 1).front() == 2);
  // A whole shard more does count.
  p.weigh(actor_id::shard(2), 3000);
  CHECK(p.candidates(actor_id::shard(1), 2, 1).front() == 0);
}

TEST_CASE("a node added to a running job receives moves until the spread is below a shard and a worker") {
  // 6 shards and 6 workers on 3 nodes (2 and 2 each), then node 3 joins.
  auto p = started(3, 6, 6, 100);
  CHECK(p.rebalance().empty());  // balanced already
  CHECK(p.add_node() == 3);
  auto moves = p.rebalance();
  REQUIRE(moves.size() == 2);  // a shard and a worker: 1-2-2-1 each
  CHECK(moves[0].first.is(actor_kind::shard));
  CHECK(moves[1].first.is(actor_kind::worker));
  for (auto& [child, to] : moves) {
    CHECK(to == 3);
    p.place(child, to);
  }
  CHECK(p.rebalance().empty());
  CHECK(p.load(3).shards == 1);
  CHECK(p.load(3).workers == 1);
  // Shards a few bytes apart (a delta's length: the probe's checkpoints
  // differ by 8 to 24 bytes) move the same: one shard, not a chain of
  // moves chasing a few bytes.
  auto r = started(3, 6, 6, 1472);
  for (uint32_t s = 0; s < 6; ++s) r.weigh(actor_id::shard(s), 1472 + 8 * (s % 3) + (s % 3 == 2 ? 8 : 0));
  r.add_node();
  auto few = r.rebalance();
  REQUIRE(few.size() == 2);
  CHECK(few[0].first.is(actor_kind::shard));
  CHECK(few[1].first.is(actor_kind::worker));
  // 12 shards on 3 nodes: a fourth node gets 3, one from each.
  auto q = started(3, 12, 0, 100);
  q.add_node();
  auto more = q.rebalance();
  CHECK(more.size() == 3);
  for (auto& [child, to] : more) q.place(child, to);
  for (uint32_t n = 0; n < 4; ++n) CHECK(q.load(n).shards == 3);
}

TEST_CASE("a draining node takes no child, its children restart on the others, and a heavy shard moves where it lowers the spread") {
  auto p = started(3, 3, 3, 100);
  p.set_draining(1, true);
  CHECK(!p.eligible(1));
  for (auto child : p.children_of(1)) {
    auto order = p.candidates(child, 2, 0);
    REQUIRE(order.size() == 2);
    CHECK(std::find(order.begin(), order.end(), 1u) == order.end());
    p.place(child, order.front());
  }
  CHECK(p.load(1).children() == 0);
  CHECK(p.load(0).children() + p.load(2).children() == 6);
  // A shard of 1000 beside shards of 100: moving it would only swap the
  // imbalance, so it stays; a lighter one moves instead when that helps.
  auto q = started(2, 4, 0, 100);  // node 0: shards 0, 2; node 1: shards 1, 3
  q.weigh(actor_id::shard(0), 1000);
  auto moves = q.rebalance();
  for (auto& [child, to] : moves) CHECK(child != actor_id::shard(0));
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].first == actor_id::shard(2));
  CHECK(moves[0].second == 1);
}

TEST_CASE("client processes take only the workers whose loops they run: no shard, no worker of keel's own, no balancing") {
  placement_policy p(2);  // node:0 and node:1 run shards
  auto a = p.add_node(), b = p.add_node();
  p.set_client(a, {0});
  p.set_client(b, {1, 2});
  CHECK(p.client(a));
  CHECK_FALSE(p.client(0));
  CHECK(p.served(b) == std::vector<uint32_t>{1, 2});
  for (uint32_t s = 0; s < 4; ++s) {
    p.estimate(actor_id::shard(s), 1000);
    auto order = p.candidates(actor_id::shard(s), 1, s);
    CHECK(order == std::vector<uint32_t>{s % 2, (s + 1) % 2});
    p.place(actor_id::shard(s), order.front());
  }
  SUBCASE("a job of keel's own workers: they never go to a client") {
    for (uint32_t w = 0; w < 3; ++w) {
      auto order = p.candidates(actor_id::worker(w), 1, 4 + w);
      CHECK(order.size() == 2);
      CHECK(std::none_of(order.begin(), order.end(), [&](uint32_t n) { return p.client(n); }));
    }
  }
  SUBCASE("a job of the application's loops: worker w goes only to a client serving it, and waits for one") {
    p.set_client_loops(true);
    CHECK(p.candidates(actor_id::worker(0), 1, 4) == std::vector<uint32_t>{a});
    CHECK(p.candidates(actor_id::worker(2), 1, 6) == std::vector<uint32_t>{b});
    CHECK(p.candidates(actor_id::worker(3), 1, 7).empty());  // no client runs it yet
    for (uint32_t w = 0; w < 3; ++w)
      p.place(actor_id::worker(w), w == 0 ? a : b);
    p.set_alive(b, false);  // the client died: its workers wait for another
    CHECK(p.candidates(actor_id::worker(1), 2, 0).empty());
    auto c = p.add_node();
    p.set_client(c, {1, 2});
    CHECK(p.candidates(actor_id::worker(1), 2, 0) == std::vector<uint32_t>{c});
    // Balancing leaves clients alone: node:1 joins empty, only shards move to it.
    auto d = p.add_node();
    auto moves = p.rebalance();
    CHECK_FALSE(moves.empty());
    for (auto& [child, to] : moves) {
      CHECK(child.is(actor_kind::shard));
      CHECK(to == d);
    }
  }
}

TEST_CASE("with worker slots a node takes workers only while it has a free slot, shards anywhere, and a forgotten worker frees its slot") {
  auto p = started(3, 3, 3, 1000);  // one shard and one worker on each node
  p.set_worker_slots(1);
  p.set_alive(2, false);
  // worker:2's node died: the survivors' slots are taken, so no node takes it.
  CHECK(p.candidates(actor_id::worker(2), 2, 2).empty());
  CHECK(!p.takes(0, actor_id::worker(2)));
  // A worker already on a node keeps its own slot there.
  CHECK(p.takes(0, actor_id::worker(0)));
  // Shards still go anywhere live.
  CHECK(p.candidates(actor_id::shard(2), 2, 2).size() == 2);
  // Two slots a node: worker:2 fits on either survivor.
  p.set_worker_slots(2);
  CHECK(p.candidates(actor_id::worker(2), 2, 2).size() == 2);
  // worker:0 leaves the job: its slot on node:0 is free again.
  p.set_worker_slots(1);
  p.forget(actor_id::worker(0));
  CHECK(!p.node_of(actor_id::worker(0)));
  auto order = p.candidates(actor_id::worker(2), 2, 2);
  REQUIRE(order.size() == 1);
  CHECK(order.front() == 0);
}
