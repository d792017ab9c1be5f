// Node processes failing under the coordinator: kill -9, SIGSTOP and a
// restart on the same port. The tests check what is seen (the down message
// and its reason, the joined node dropping a hung peer); how fast is
// measured by bench/cluster/node_failover.sh, not asserted here, where
// ctest -j and sanitizers share two cores. The waits' limits only keep a
// missing event from hanging the test.
#include <signal.h>

#include <caf/io/all.hpp>

#include "cluster_fixture.hpp"

using namespace keel;
using namespace keel::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr auto patience = 10s;

// Waits for the down_msg of `watched`; the time from `since`, or fails.
std::chrono::milliseconds wait_down(caf::scoped_actor& self, const caf::actor& watched, steady::time_point since,
                                    std::chrono::milliseconds limit, caf::error* reason = nullptr) {
  bool down = false;
  auto deadline = steady::now() + limit;
  while (!down && steady::now() < deadline) {
    self->receive([&](caf::down_msg& dm) {
                    if (dm.source == watched.address()) {
                      down = true;
                      if (reason)
                        *reason = dm.reason;
                    }
                  },
                  caf::after(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now())) >> [] {});
  }
  REQUIRE_MESSAGE(down, "no down_msg within " << limit.count() << " ms");
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - since);
}

}  // namespace

TEST_CASE("a coordinator monitoring a shard on a node sees it down, its link lost, after kill -9") {
  cluster_fixture f;
  auto n = f.start_node();
  auto h = f.connect(*n);
  auto shard = spawn_small_shard(h, patience);
  caf::scoped_actor self{*f.sys};
  self->monitor(shard);
  auto t0 = steady::now();
  n->signal(SIGKILL);
  caf::error reason;
  auto took = wait_down(self, shard, t0, 5s, &reason);
  MESSAGE("kill -9 -> down_msg of the remote shard after " << took.count() << " ms (" << to_string(reason) << ")");
  CHECK(reason == caf::exit_reason::remote_link_unreachable);
  CHECK(n->wait_exit(patience) == 128 + SIGKILL);
}

TEST_CASE("a SIGSTOPped node is detected by the coordinator and by the node that joined it") {
  cluster_fixture f;
  auto n1 = f.start_node();
  auto n2 = f.start_node({"--join", "127.0.0.1:" + std::to_string(n1->port())});
  REQUIRE(n2->wait_stdout("joined node", patience));
  auto h1 = f.connect(*n1);
  auto h2 = f.connect(*n2);
  auto listed = [&](const node_handle& h, const std::string& id) {
    auto l = list_nodes(h, patience);
    REQUIRE_MESSAGE(l, describe(l.error()));
    for (auto& info : *l)
      if (info.node == id)
        return true;
    return false;
  };
  REQUIRE(wait_until([&] { return listed(h2, n1->node_id()); }, patience));
  auto shard = spawn_small_shard(h1, patience);
  caf::scoped_actor self{*f.sys};
  self->monitor(shard);

  auto t0 = steady::now();
  n1->signal(SIGSTOP);
  // A stopped process closes no connection: only the heartbeat's timeout
  // can find it, so the loss is of the link, not an exit of the shard.
  caf::error reason;
  auto coordinator = wait_down(self, shard, t0, 5s, &reason);
  CHECK(reason == caf::exit_reason::remote_link_unreachable);
  REQUIRE(wait_until([&] { return !listed(h2, n1->node_id()); }, 5s));
  auto peer = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0);
  MESSAGE("SIGSTOP -> coordinator's down_msg after " << coordinator.count() << " ms, joined node drops it after "
                                                     << peer.count() << " ms");
  CHECK_MESSAGE(n2->wait_log("node " + n1->node_id(), patience), n2->log());
  n1->signal(SIGCONT);
}

TEST_CASE("a node restarted on the same port after kill -9 serves spawns again") {
  cluster_fixture f;
  auto n = f.start_node();
  auto port = n->port();
  auto h = f.connect(*n);
  auto shard = spawn_small_shard(h, patience);
  caf::scoped_actor self{*f.sys};
  self->monitor(shard);
  n->signal(SIGKILL);
  wait_down(self, shard, steady::now(), 5s);
  REQUIRE(n->wait_exit(patience));

  auto restarted = f.start_node({}, port);
  CHECK(restarted->port() == port);
  CHECK(restarted->node_id() != n->node_id());
  auto h2 = f.connect(*restarted);
  CHECK(h2.node == restarted->node_id());
  auto again = spawn_small_shard(h2, patience);
  CHECK(to_string(again.node()) == restarted->node_id());
  auto status = status_of(h2, patience);
  REQUIRE(status);
  CHECK(status->children == 1);
}

TEST_CASE("an exit without a sender, as a peer's anon_send_exit arrives, is ignored and the node keeps serving") {
  cluster_fixture f;
  auto n = f.start_node();
  auto h = f.connect(*n);
  // BASP delivers an anonymous exit from another process without a source:
  // the agent cannot tell it from a local one, so it refuses both.
  caf::anon_send_exit(h.agent, caf::exit_reason::user_shutdown);
  CHECK_MESSAGE(n->wait_log("ignored an exit (exit_reason(user_shutdown)) without a sender", patience), n->log());
  auto shard = spawn_small_shard(h, patience);
  CHECK(to_string(shard.node()) == n->node_id());
  CHECK_FALSE(n->wait_exit(0ms));
  n->signal(SIGTERM);
  CHECK_MESSAGE(n->wait_exit(patience) == 0, n->log());
}
