// worker_core's replay log and its shards' restarts: out-of-order acks
// resend what the log holds, checkpoints truncate it, its byte bound, a
// restarted or replaced shard incarnation gets exactly what it lacks, and
// retries and a halted worker (fixture: worker_core_fixture.hpp).
#include "worker_core_fixture.hpp"

using namespace keel;
using namespace keel::test;

TEST_CASE("an out-of-order ack resends the logged pushes from the seq the shard expects") {
  auto c = started();
  run_step(c);
  run_step(c);
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));  // seq 3 is out
  auto out = c.acked(0, ack(0, 3, Status::OUT_OF_ORDER, 2).root());
  REQUIRE(out);
  CHECK(seqs(out->resend) == std::vector<uint64_t>{2, 3});
  CHECK(!out->step_complete);
  CHECK(c.phase() == phase::pushing);
}

TEST_CASE(
    "an out-of-order ack waiting for a push not yet sent asks for nothing, even from an empty "
    "log") {
  auto c = started();
  run_step(c);  // pulling step 1: seq 1 is the last sent
  cut_log(c, 0, 1);
  REQUIRE(c.log().first_seq(0) == 0);
  auto out = c.acked(0, ack(0, 1, Status::OUT_OF_ORDER, 2).root());
  REQUIRE(out);
  CHECK(out->resend.empty());
  CHECK_FALSE(out->rollback);
  CHECK(c.phase() == phase::pulling);
}

TEST_CASE("an out-of-order ack for a push the log no longer holds needs a rollback") {
  auto c = started();
  run_step(c);
  run_step(c);
  cut_log(c, 0, 1);
  auto out = c.acked(0, ack(0, 2, Status::OUT_OF_ORDER, 1).root());
  REQUIRE(out);
  CHECK(out->rollback == "shard-0 needs push 1 of worker 7, which its log no longer holds");
  CHECK(out->resend.empty());
  CHECK(c.phase() == phase::halted);
}

TEST_CASE("a shard restarted from the checkpoint before the one just committed is replayed, not rolled back") {
  // The race: shard 0 dies and restarts from checkpoint 1 (the newest
  // committed then) while checkpoint 2 commits; the commit reaches this
  // worker before the restarted shard's status does.
  auto c = started();
  for (int i = 0; i < 3; ++i) run_step(c);
  c.checkpoint_committed(0, 1);
  c.checkpoint_committed(0, 2);
  auto plan = c.replay(0, 1);
  CHECK_FALSE(plan.rollback);
  REQUIRE(plan.resend.size() == 2);  // seqs 2 and 3
  CHECK(c.phase() != phase::halted);
}

TEST_CASE("a committed checkpoint truncates the log to the shard's previous checkpoint") {
  auto c = started();
  for (int i = 0; i < 3; ++i) run_step(c);
  CHECK(c.log().size() == 6);
  // The first checkpoint cuts nothing: a shard restarted while it was being
  // committed restored from the one before (here: none) and needs it all.
  CHECK(!c.checkpoint_committed(0, 1));
  CHECK(c.log().first_seq(0) == 1);
  CHECK(c.log().size() == 6);
  // The next one cuts what the first covered.
  CHECK(!c.checkpoint_committed(0, 2));
  CHECK(c.log().first_seq(0) == 2);
  CHECK(c.log().first_seq(1) == 1);  // each shard's log follows its own checkpoints
  CHECK(c.log().size() == 5);
  CHECK(!c.checkpoint_committed(0, 3));
  CHECK(c.log().first_seq(0) == 3);
  CHECK(c.log().size() == 4);
}

TEST_CASE("a checkpoint covering the step's push counts as its acknowledgement") {
  auto c = started();
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  CHECK(!c.checkpoint_committed(0, 1));  // shard 1 still owes its ack
  CHECK(c.max_acked(0) == 1);
  CHECK(c.log().first_seq(0) == 1);  // kept until the next checkpoint
  auto out = c.acked(1, ack(1, 1).root());
  REQUIRE(out);
  CHECK(out->step_complete);
  start_next(c);
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  REQUIRE(c.acked(0, ack(0, 2).root()));
  CHECK(c.checkpoint_committed(1, 2));  // the last one missing completes the step
  CHECK(c.step() == 2);
}

TEST_CASE("a restarted shard gets exactly the logged pushes after its received seq") {
  auto c = started();
  for (int i = 0; i < 3; ++i) run_step(c);
  CHECK(c.shard_up(0, 2) == worker_core::shard_action::replay);
  auto plan = c.replay(0, 1);
  CHECK_FALSE(plan.rollback);
  CHECK(seqs(plan.resend) == std::vector<uint64_t>{2, 3});
  CHECK(c.report().replayed == 2);
  CHECK(c.replay(1, 3).resend.empty());  // shard 1 holds everything
  CHECK(c.report().replayed == 2);
}

TEST_CASE("a restarted shard that has not answered the step's pull is pulled again") {
  auto c = started();
  run_step(c);
  REQUIRE(c.pulled(0, reply(c, 0).root()));
  CHECK(!c.replay(0, 1).pull_again);
  CHECK(c.replay(1, 1).pull_again);
}

TEST_CASE("without checkpoints the log keeps within its byte bound, dropping its oldest steps, never the open one") {
  // One step's two pushes, as the log counts them.
  size_t step_bytes = 0;
  {
    auto probe = started();
    run_step(probe);
    step_bytes = probe.log().bytes();
  }
  REQUIRE(step_bytes > 0);
  auto cfg = config();
  cfg.log_bound = 2 * step_bytes;  // two steps
  auto c = started(cfg);
  for (int i = 0; i < 5; ++i) {
    run_step(c);
    CHECK(c.log().bytes() <= cfg.log_bound);
  }
  CHECK(c.log().size() == 4);  // steps 4 and 5 on both shards
  CHECK(c.log().first_seq(0) == 4);
  CHECK(c.log().first_seq(1) == 4);
  CHECK(c.log().peak_bytes() <= cfg.log_bound + step_bytes);  // the new step counted before the drop
  // A bound below one step keeps the open step's pushes all the same: a
  // shard may still need them resent.
  auto tight = config();
  tight.log_bound = 1;
  auto t = started(tight);
  run_step(t);
  answer_pulls(t);
  t.begin_push(gradient(t, 1.0f));
  CHECK(t.log().size() == 2);
  CHECK(t.log().first_seq(0) == 2);
  // A shard restarted from the starting state (no checkpoint) cannot be
  // replayed now: a rollback, to step 0.
  auto plan = c.replay(0, 0);
  CHECK(plan.rollback == "shard-0 restored to seq 0 of worker 7, whose log starts at 4");
}

TEST_CASE("with checkpoints the byte bound drops nothing: it pauses at checkpoint steps instead") {
  auto cfg = config();
  cfg.log_bound = 1;
  cfg.checkpoint_every = 100;
  auto c = started(cfg);
  for (int i = 0; i < 3; ++i) run_step(c);
  CHECK(c.log().size() == 6);
  CHECK(c.log().first_seq(0) == 1);
}

TEST_CASE("a shard restored behind the log's first seq needs a rollback") {
  auto c = started();
  for (int i = 0; i < 3; ++i) run_step(c);
  cut_log(c, 0, 2);
  auto plan = c.replay(0, 1);
  CHECK(plan.rollback == "shard-0 restored to seq 1 of worker 7, whose log starts at 3");
  CHECK(plan.resend.empty());
  CHECK(c.phase() == phase::halted);
  CHECK(c.shard_up(1, 2) == worker_core::shard_action::none);  // halted: nothing more
}

TEST_CASE(
    "a shard restored with everything this worker sent needs nothing, even with an empty log") {
  auto c = started();
  for (int i = 0; i < 2; ++i) run_step(c);
  cut_log(c, 0, 2);
  CHECK(c.log().first_seq(0) == 0);
  auto plan = c.replay(0, 2);
  CHECK_FALSE(plan.rollback);
  CHECK(plan.resend.empty());
  CHECK(c.phase() != phase::halted);
  auto behind = c.replay(0, 1);  // an empty log cannot supply seq 2
  CHECK(behind.rollback == "shard-0 restored to seq 1 of worker 7, whose log starts at 0");
}

TEST_CASE("a retry fires only while its generation and shard are still open") {
  auto c = started();
  auto pull_gen = c.generation();
  CHECK(c.retry(pull_gen, 0, false) == worker_core::retry_action::pull);
  CHECK(c.retry(pull_gen - 1, 0, false) == worker_core::retry_action::none);
  REQUIRE(c.pulled(0, reply(c, 0).root()));
  CHECK(c.retry(pull_gen, 0, false) == worker_core::retry_action::none);
  REQUIRE(c.pulled(1, reply(c, 1).root()));
  c.begin_push(gradient(c, 1.0f));
  auto push_gen = c.generation();
  CHECK(c.retry(pull_gen, 1, false) == worker_core::retry_action::none);
  CHECK(c.retry(push_gen, 1, true) == worker_core::retry_action::push);
  CHECK(seqs(c.unacked(1)) == std::vector<uint64_t>{1});
  REQUIRE(c.acked(1, ack(1, 1).root()));
  CHECK(c.retry(push_gen, 1, true) == worker_core::retry_action::none);
}

TEST_CASE("a status retry fires while resuming") {
  worker_core c(config());
  for (uint32_t i = 0; i < 2; ++i) c.shard_up(i, 1);
  CHECK(c.retry(c.generation(), 1, false) == worker_core::retry_action::status);
  CHECK(c.retry(c.generation(), 1, true) == worker_core::retry_action::none);
}

TEST_CASE("a halted worker ignores acks and its in-flight requests") {
  auto c = started();
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  auto gen = c.generation();
  c.halt();
  CHECK(c.phase() == phase::halted);
  CHECK(!c.push_open(gen, 0));
  CHECK(c.retry(gen, 0, true) == worker_core::retry_action::none);
  auto out = c.acked(0, ack(0, 1).root());
  REQUIRE(out);
  CHECK(!out->step_complete);
  CHECK(c.max_acked(0) == 0);
}

TEST_CASE(
    "after the last step the report counts the steps and each shard's acknowledged pushes once") {
  auto cfg = config();
  cfg.total_steps = 3;
  auto c = started(cfg);
  for (int i = 0; i < 3; ++i) run_step(c);
  CHECK(c.phase() == phase::finished);
  CHECK(c.next_step() == worker_core::step_start::finished);
  auto r = c.report();
  CHECK(r.worker == 7);
  CHECK(r.epoch == 3);
  CHECK(r.steps == 3);
  CHECK(r.pushes_acked == 6);
  CHECK(r.last_loss == 0.5);
  CHECK(c.shard_up(0, 2) == worker_core::shard_action::replay);  // a finished worker still replays
}

TEST_CASE("a worker ignores an ack from a replaced shard incarnation and readdresses its log to the new one") {
  auto c = started();
  answer_pulls(c);
  c.set_shard_epoch(0, 1);
  c.set_shard_epoch(1, 1);
  c.begin_push(gradient(c, 1.0f));
  auto epoch_of = [](const push_msg& m) { return decode(m)->root().getShardEpoch(); };
  REQUIRE(c.unacked(0).size() == 1);
  CHECK(epoch_of(c.unacked(0)[0]) == 1);
  // Shard 0 is replaced by epoch 5 (its status reply named it).
  CHECK(c.shard_up(0, 2) == worker_core::shard_action::replay);
  c.set_shard_epoch(0, 5);
  // The old incarnation's ack of the step's push does not count.
  auto stale = c.acked(0, ack(0, 1, Status::APPLIED, 0, "", 1).root());
  REQUIRE(stale);
  CHECK_FALSE(stale->step_complete);
  auto plan = c.replay(0, 0);
  REQUIRE(plan.resend.size() == 1);
  CHECK(epoch_of(plan.resend[0]) == 5);
  CHECK(epoch_of(c.unacked(0)[0]) == 5);
  // The new incarnation's ack and shard 1's complete the step.
  auto fresh = c.acked(0, ack(0, 1, Status::APPLIED, 0, "", 5).root());
  REQUIRE(fresh);
  CHECK_FALSE(fresh->step_complete);
  auto other = c.acked(1, ack(1, 1, Status::APPLIED, 0, "", 1).root());
  REQUIRE(other);
  CHECK(other->step_complete);
}

TEST_CASE("a pull reply from a replaced shard incarnation is ignored, and pulls name the current epoch") {
  auto c = started();
  c.set_shard_epoch(0, 2);
  CHECK(decode(c.pull_request(0))->root().getShardEpoch() == 2);
  auto old = reply(c, 0);  // names epoch 0: not the current one
  auto all = c.pulled(0, old.root());
  REQUIRE(all);
  CHECK_FALSE(*all);
  CHECK(c.pull_open(c.generation(), 0));
}
