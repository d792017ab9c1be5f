// A shard under elastic workers (shard_core with a worker_schedule): each
// BSP step waits for and sums the pushes of that step's workers only, SSP's
// slowest worker is the slowest taking part, a push outside its worker's
// span is refused, and a worker that joins later holds seqs from its step.
#include <doctest/doctest.h>

#include "actors/core/shard_core.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "push_builder.hpp"

using namespace keel;
using namespace keel::test;
using Status = schema::PushAck::Status;

namespace {

// Worker 1 joins at step 2, worker 0 leaves at step 4; SGD with lr 1 on
// four dense keys [10, 14).
shard_core elastic(consistency_kind kind, uint32_t staleness = 0) {
  shard_config c;
  c.shard = 0;
  c.num_workers = 2;
  c.dense = {10, 14};
  c.sparse = {1000, 2000};
  c.rule = {kind, staleness};
  c.optimizer.kind = optimizer_kind::sgd;
  c.optimizer.lr = 1.0f;
  auto schedule = worker_schedule::parse("join:worker:1@2,leave:worker:0@4", 2, 10);
  REQUIRE(schedule);
  c.workers = *schedule;
  auto core = shard_core::make(c, std::vector<float>(4, 0.0f));
  REQUIRE_MESSAGE(core, describe(core.error()));
  return std::move(*core);
}

// Worker w's push of step `step` (its seq is step + 1): gradient g on key 10.
decoded<schema::Push> push_of(uint32_t w, uint64_t step, float g) {
  return make_push(w, step + 1, step, 10, {g, 0, 0, 0});
}

}  // namespace

TEST_CASE("under BSP a step waits for and sums the pushes of that step's workers only") {
  auto s = elastic(consistency_kind::bsp);
  // Worker 1 joins at step 2: it holds seqs up to 2 already (nothing to push before).
  CHECK(s.applied(1) == 2);
  CHECK(s.worker_clock(1) == 2);
  // Steps 0 and 1: worker 0 alone.
  CHECK(s.offer(push_of(0, 0, -1)).steps_applied == 1);
  CHECK(s.offer(push_of(0, 1, -1)).steps_applied == 1);
  CHECK(s.dense()[0] == 2.0f);
  // Step 2: both; worker 1's push alone does not complete it.
  auto early = s.offer(push_of(1, 2, -10));
  CHECK(early.status == Status::ACCEPTED);
  CHECK(early.steps_applied == 0);
  CHECK(s.offer(push_of(0, 2, -1)).steps_applied == 1);
  CHECK(s.dense()[0] == 13.0f);
  CHECK(s.offer(push_of(0, 3, -1)).steps_applied == 0);
  CHECK(s.offer(push_of(1, 3, -10)).steps_applied == 1);
  // Step 4: worker 0 has left; worker 1 alone completes it.
  auto gone = s.offer(push_of(0, 4, -1));
  CHECK(gone.status == Status::REJECTED);
  CHECK_MESSAGE(gone.reason.find("worker 0 takes part in steps 0 to 3, not in step 4") != std::string::npos, gone.reason);
  CHECK(s.offer(push_of(1, 4, -10)).steps_applied == 1);
  CHECK(s.bsp_clock() == 5);
  CHECK(s.dense()[0] == 34.0f);
  // A push of worker 1 for a step before it joined: refused (its seq is taken).
  auto s2 = elastic(consistency_kind::bsp);
  auto before = s2.offer(make_push(1, 3, 1, 10, {1, 0, 0, 0}));
  CHECK(before.status == Status::REJECTED);
  CHECK(before.reason.find("worker 1 takes part in steps 2 to the end, not in step 1") != std::string::npos);
}

TEST_CASE("under elastic workers a restored shard holds the joined worker's seqs as the original did") {
  auto s = elastic(consistency_kind::bsp);
  s.offer(push_of(0, 0, -1));
  auto snap = snapshot_of(s, 1, 0);
  REQUIRE(snap);
  auto d = decode(*snap);
  REQUIRE_MESSAGE(d, describe(d.error()));
  auto back = restore_shard(s.config(), d->root());
  REQUIRE_MESSAGE(back, describe(back.error()));
  CHECK(back->applied(1) == 2);
  CHECK(back->bsp_clock() == 1);
  CHECK(back->offer(push_of(0, 1, -1)).steps_applied == 1);
  CHECK(back->offer(push_of(1, 2, -1)).steps_applied == 0);  // step 2 waits for worker 0 again
}

TEST_CASE("under SSP the slowest worker is the slowest taking part: one that left does not hold the others back") {
  auto s = elastic(consistency_kind::ssp, 1);
  // Worker 1's clock starts at its join step: it does not hold back the
  // steps before it.
  s.offer(push_of(0, 0, -1));
  s.offer(push_of(0, 1, -1));
  CHECK(s.can_serve(2));
  CHECK(s.can_serve(3));  // worker 1 is at 2, within 1 of 3
  CHECK_FALSE(s.can_serve(4));
  s.offer(push_of(1, 2, -1));
  s.offer(push_of(1, 3, -1));
  s.offer(push_of(0, 2, -1));
  s.offer(push_of(0, 3, -1));  // worker 0's last step: it leaves at 4
  s.offer(push_of(1, 4, -1));
  s.offer(push_of(1, 5, -1));
  CHECK(s.can_serve(7));  // worker 0 stopped at 4 for good; only worker 1 (at 6) counts
  CHECK_FALSE(s.can_serve(8));
}

TEST_CASE("a worker held in reserve joins when the job changes the schedule: its seqs start at its join, and restores agree") {
  shard_config c;
  c.shard = 0;
  c.num_workers = 2;
  c.dense = {10, 14};
  c.rule = {consistency_kind::bsp, 0};
  c.optimizer.kind = optimizer_kind::sgd;
  c.optimizer.lr = 1.0f;
  auto reserve = worker_schedule::parse("reserve:worker:1", 2, 10);
  REQUIRE_MESSAGE(reserve, describe(reserve.error()));
  c.workers = *reserve;
  auto made = shard_core::make(c, std::vector<float>(4, 0.0f));
  REQUIRE_MESSAGE(made, describe(made.error()));
  auto s = std::move(*made);
  CHECK(s.applied(1) == reserve_step);  // never pushes while in reserve
  CHECK(s.offer(push_of(0, 0, -1)).steps_applied == 1);  // worker 0 alone
  auto before = snapshot_of(s, 1, 0);  // a checkpoint from before the change
  REQUIRE(before);
  auto joined = reserve->changed("join:worker:1", 2, 10);
  REQUIRE_MESSAGE(joined, describe(joined.error()));
  s.change_workers(*joined);
  CHECK(s.applied(1) == 2);
  CHECK(s.received(1) == 2);
  CHECK(s.worker_clock(1) == 2);
  CHECK(s.offer(push_of(0, 1, -1)).steps_applied == 1);
  CHECK(s.offer(push_of(0, 2, -1)).steps_applied == 0);  // step 2 waits for worker 1 now
  CHECK(s.offer(push_of(1, 2, -1)).steps_applied == 1);
  // A restore of the checkpoint from before the change, under the changed
  // schedule: worker 1 never pushed, so its seqs are its join's.
  c.workers = *joined;
  auto d = decode(*before);
  REQUIRE_MESSAGE(d, describe(d.error()));
  auto restored = restore_shard(c, d->root());
  REQUIRE_MESSAGE(restored, describe(restored.error()));
  CHECK(restored->applied(1) == 2);
  CHECK(restored->worker_clock(1) == 2);
  CHECK(restored->offer(push_of(0, 1, -1)).steps_applied == 1);
  CHECK(restored->offer(push_of(1, 2, -1)).steps_applied == 0);  // step 2 waits for worker 0
  CHECK(restored->offer(push_of(0, 2, -1)).steps_applied == 1);
}
