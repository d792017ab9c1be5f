// Reading recoveries back from a job's timeline (actors/faults/recovery.hpp), on
// synthetic timelines shaped like the ones a job records: faults from the
// job, down/restart from supervision, replay and rollback from workers,
// rollback/restored from the job.
#include <doctest/doctest.h>

#include "actors/faults/recovery.hpp"
#include "built_by_hand.hpp"

using namespace keel;
using keel::test::at;

namespace {

job_event kill(int64_t us, const std::string& victim) {
  auto e = at(us, event_kind::fault, victim, "killed (exit_reason::kill)");
  e.killed = true;
  e.fault = "kill:" + victim;
  return e;
}

// A restart from the snapshot labelled `from` ("" for a fresh start). The
// detail is deliberately unlike supervision's prose: readers use the fields.
job_event restart(int64_t us, const std::string& sup, const std::string& child,
                  const std::string& from) {
  auto e = at(us, event_kind::restart, child, sup + " restarted it");
  e.snapshot = from;
  return e;
}

job_event replay(int64_t us, int worker, const std::string& shard, uint64_t n) {
  auto e = at(us, event_kind::replay, "worker:" + std::to_string(worker), "resent some pushes");
  e.peer = shard;
  e.count = n;
  return e;
}

job_event restored(int64_t us, uint64_t checkpoint, uint64_t step) {
  auto e = at(us, event_kind::restored, "root", "the tree starts again");
  e.checkpoint = checkpoint;
  e.step = step;
  return e;
}

}  // namespace

TEST_CASE("a kill pairs with the victim's next restart, not another actor's") {
  std::vector<job_event> t = {
    at(100, event_kind::checkpoint, "checkpointer", "checkpoint 1 at step 10"),
    kill(1'000, "shard:0"),
    at(1'050, event_kind::down, "shard:0", "down shards/shard:0 #1: killed; restart in 0 ms"),
    restart(1'200, "shards", "shard:1", "ckpt-9"),
    restart(1'610, "shards", "shard:0", "ckpt-3"),
    kill(5'000, "worker:1"),
    restart(5'400, "workers", "worker:1", ""),
  };
  auto rs = recoveries(t);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].victim == "shard:0");
  CHECK(rs[0].kind == "shard");
  CHECK(rs[0].fault == "killed (exit_reason::kill)");
  CHECK(rs[0].fault_at_us == 1'000);
  REQUIRE(rs[0].served_after_us);
  CHECK(*rs[0].served_after_us == 610);
  CHECK(rs[0].restored_from == "ckpt-3");
  CHECK(rs[1].victim == "worker:1");
  CHECK(rs[1].kind == "worker");
  CHECK(*rs[1].served_after_us == 400);
  CHECK(rs[1].restored_from == "fresh");
}

TEST_CASE("replays count toward the named shard's recovery until its next fault") {
  std::vector<job_event> t = {
    replay(50, 0, "shard:0", 100),  // before any recovery: belongs to none
    kill(1'000, "shard:0"),
    restart(1'500, "shards", "shard:0", "a"),
    replay(1'600, 0, "shard:0", 5),
    replay(1'650, 1, "shard:0", 7),
    replay(1'700, 1, "shard:1", 9),  // another shard
    kill(3'000, "shard:0"),
    restart(3'300, "shards", "shard:0", "b"),
    replay(3'400, 0, "shard:0", 2),
  };
  auto rs = recoveries(t);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].replayed == 12);
  CHECK(rs[1].replayed == 2);
  CHECK(rs[1].restored_from == "b");
}

TEST_CASE("a killed shard supervisor is a supervisor recovery that gets its shards' replays") {
  std::vector<job_event> t = {
    kill(1'000, "shard:1"),
    restart(1'100, "root", "shard:1", "a"),
    kill(2'000, "shards"),
    restart(2'500, "root", "shards", ""),
    replay(2'600, 0, "shard:0", 3),
    replay(2'700, 0, "shard:1", 4),
  };
  auto rs = recoveries(t);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].replayed == 0);  // the later supervisor restart took over shard:1
  CHECK(rs[1].victim == "shards");
  CHECK(rs[1].kind == "supervisor");
  CHECK(rs[1].replayed == 7);
  CHECK(to_string(rs[1]) ==
        "shards killed (exit_reason::kill) at 2.0 ms: serving again after 0.50 ms, restarted with "
        "its children, 7 pushes replayed");
}

TEST_CASE("a victim that never restarts did not come back") {
  std::vector<job_event> t = {
    kill(1'000, "checkpointer"),
    at(1'100, event_kind::down, "checkpointer", "down root/checkpointer #1: killed"),
    at(1'200, event_kind::escalate, "root", "root gave up"),
    at(1'300, event_kind::fault, "shard:0", "not killed: 'shard:0' not found"),
  };
  auto rs = recoveries(t);
  REQUIRE(rs.size() == 1);  // a kill that was never injected is no recovery
  CHECK(rs[0].kind == "checkpointer");
  CHECK_FALSE(rs[0].served_after_us);
  CHECK(to_string(rs[0]) == "checkpointer killed (exit_reason::kill) at 1.0 ms: did not come back");
}

TEST_CASE("a kill of root recovers when the job has rolled back to a checkpoint") {
  std::vector<job_event> t = {
    kill(10'000, "root"),
    at(10'200, event_kind::rollback, "root", "the root supervisor went down: killed"),
    restored(12'000, 3, 40),
    replay(12'500, 0, "shard:1", 6),
  };
  auto rs = recoveries(t);
  REQUIRE(rs.size() == 1);  // the rollback belongs to the kill, not a recovery of its own
  CHECK(rs[0].victim == "root");
  CHECK(rs[0].kind == "root");
  CHECK(*rs[0].served_after_us == 2'000);
  CHECK(rs[0].restored_from == "checkpoint 3 at step 40");
  CHECK(rs[0].rolled_back);
  CHECK(rs[0].replayed == 6);
  CHECK(to_string(rs[0]) ==
        "root killed (exit_reason::kill) at 10.0 ms: serving again after 2.00 ms, rolled back to "
        "checkpoint 3 at step 40, 6 pushes replayed");
}

TEST_CASE("a rollback a worker asks for is a recovery of root, and brings back waiting victims") {
  std::vector<job_event> t = {
    kill(1'000, "worker:0"),
    at(2'000, event_kind::rollback, "worker:1",
       "shard:0 restored to seq 3 of worker 1, whose log starts at 9"),
    at(2'010, event_kind::rollback, "root", "shard:0 restored to seq 3 of worker 1, whose log starts at 9"),
    restored(2'510, 0, 0),
  };
  auto rs = recoveries(t);
  REQUIRE(rs.size() == 2);
  CHECK(rs[0].victim == "worker:0");
  CHECK(*rs[0].served_after_us == 1'510);
  CHECK(rs[0].restored_from == "fresh");
  CHECK(rs[0].rolled_back);
  CHECK(rs[1].victim == "root");
  CHECK(rs[1].fault == "shard:0 restored to seq 3 of worker 1, whose log starts at 9");
  CHECK_FALSE(after_kill(rs[1]));
  CHECK(*rs[1].served_after_us == 500);
  CHECK(to_string(rs[1]) ==
        "root rollback (shard:0 restored to seq 3 of worker 1, whose log starts at 9) at 2.0 ms: "
        "serving again after 0.50 ms, rolled back to step 0 (no valid checkpoint), 0 pushes "
        "replayed");
}

TEST_CASE("one line per recovery names the fault, the time to serve again and the replays") {
  recovery r;
  r.victim = "shard:0";
  r.kind = "shard";
  r.fault = "killed (exit_reason::kill)";
  r.killed = true;
  r.fault_at_us = 1'234'500;
  r.served_after_us = 610;
  r.restored_from = "checkpoint-3";
  r.replayed = 12;
  CHECK(to_string(r) ==
        "shard:0 killed (exit_reason::kill) at 1234.5 ms: serving again after 0.61 ms, restored "
        "from snapshot checkpoint-3, 12 pushes replayed");
  r.replayed = 1;
  CHECK(to_string(r).find(", 1 push replayed") != std::string::npos);
  r.victim = "worker:1";
  r.kind = "worker";
  r.restored_from = "fresh";
  CHECK(to_string(r) ==
        "worker:1 killed (exit_reason::kill) at 1234.5 ms: serving again after 0.61 ms, restarted "
        "fresh");
}

TEST_CASE("actor kinds: indexed names by prefix, the two supervisors as supervisor") {
  CHECK(recovery_kind("shard:3") == "shard");
  CHECK(recovery_kind("worker:0") == "worker");
  CHECK(recovery_kind("shards") == "supervisor");
  CHECK(recovery_kind("workers") == "supervisor");
  CHECK(recovery_kind("checkpointer") == "checkpointer");
  CHECK(recovery_kind("root") == "root");
}
