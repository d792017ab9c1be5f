// worker_core without an actor (fixture: worker_core_fixture.hpp): how a
// worker resolves its shards and resumes, the window, pulls, pushes and
// acks. Its replay log and its shards' restarts: worker_core_log_test.cpp.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "worker_core_fixture.hpp"

using namespace keel;
using namespace keel::test;

TEST_CASE("a worker resolves until the directory names every shard, then asks each its status") {
  worker_core c(config());
  CHECK(c.phase() == phase::resolving);
  CHECK(c.shard_up(0, 1) == worker_core::shard_action::none);
  CHECK(c.shard_up(0, 2) == worker_core::shard_action::none);  // still missing shard 1
  CHECK(c.phase() == phase::resolving);
  CHECK(c.shard_up(1, 1) == worker_core::shard_action::resume);
  CHECK(c.phase() == phase::resuming);
}

TEST_CASE("a fresh worker whose shards hold nothing of it starts at step 0") {
  worker_core c(config(consistency_kind::bsp));
  CHECK(resume_with(c, {0, 0}) == worker_core::resume_outcome::start);
  CHECK(c.step() == 0);
  CHECK(c.next_step() == worker_core::step_start::pull);
  c.begin_pull({1});
  CHECK(c.phase() == phase::pulling);
}

TEST_CASE("a restarted worker resumes at the first step some shard lacks") {
  worker_core c(config(consistency_kind::asp));
  auto gen = [&] {
    for (uint32_t i = 0; i < 2; ++i) c.shard_up(i, 1);
    return c.generation();
  }();
  CHECK(c.status_received(gen, 0, 5) == worker_core::resume_outcome::pending);
  CHECK(c.status_received(gen, 1, 3) == worker_core::resume_outcome::start);
  CHECK(c.step() == 3);
  CHECK(c.max_acked(0) == 5);  // what the shards hold counts as acknowledged
  CHECK(c.max_acked(1) == 3);
}

TEST_CASE("under BSP a restarted worker whose shards are ahead asks for a rollback") {
  worker_core c(config(consistency_kind::bsp));
  CHECK(resume_with(c, {5, 3}) == worker_core::resume_outcome::rollback);
  CHECK(c.phase() == phase::halted);
  CHECK(c.rollback_reason() == "restarted worker 7 lost pushes 4..5 that a restored shard needs");
}

TEST_CASE("under BSP a restarted worker whose shards agree resumes without a rollback") {
  worker_core c(config(consistency_kind::bsp));
  CHECK(resume_with(c, {4, 4}) == worker_core::resume_outcome::start);
  CHECK(c.step() == 4);
  CHECK(c.position().epoch == 1);  // four steps per epoch
  CHECK(c.position().step == 0);
}

TEST_CASE(
    "a status reply from a stale generation or a shard that already answered changes nothing") {
  worker_core c(config());
  for (uint32_t i = 0; i < 2; ++i) c.shard_up(i, 1);
  auto gen = c.generation();
  CHECK(c.status_received(gen - 1, 0, 9) == worker_core::resume_outcome::pending);
  CHECK(!c.done(0));
  CHECK(c.status_received(gen, 0, 2) == worker_core::resume_outcome::pending);
  CHECK(c.status_received(gen, 0, 9) == worker_core::resume_outcome::pending);  // counts once
  CHECK(c.status_received(gen, 1, 6) == worker_core::resume_outcome::start);
  CHECK(c.step() == 2);  // the first answer of shard 0 stands
  start_next(c);
  CHECK(!c.status_open(gen));
}

TEST_CASE("a shard restarted while the worker resumes is asked again whether or not it had answered") {
  worker_core c(config());
  for (uint32_t i = 0; i < 2; ++i) c.shard_up(i, 1);
  CHECK(c.shard_up(1, 2) == worker_core::shard_action::ask_status);
  c.status_received(c.generation(), 0, 0);
  CHECK(c.shard_up(0, 2) == worker_core::shard_action::ask_status);
  CHECK(!c.done(0));  // the replaced incarnation's answer is dropped
  CHECK(c.status_received(c.generation(), 0, 0) == worker_core::resume_outcome::pending);
  CHECK(c.status_received(c.generation(), 1, 0) == worker_core::resume_outcome::start);
  start_next(c);
  CHECK(c.shard_up(0, 3) == worker_core::shard_action::replay);  // resumed: a restart is replayed
}

// The chaos tier's hang (seed 10107 of the long run): a restarted worker
// asked the shards' status just as their supervisor restarted them; shard 0's
// old incarnation answered 5, its new one was restored from the checkpoint
// before (3). With the old answer standing the worker resumed at step 5, a
// step shard 0 could never serve under BSP (it lacked pushes 4..5 of this
// worker, which no log held), and the run hung.
TEST_CASE("under BSP the status of a shard's new incarnation (not its old one's) decides where a worker resumes") {
  worker_core c(config(consistency_kind::bsp));
  for (uint32_t i = 0; i < 2; ++i) c.shard_up(i, 1);
  auto gen = c.generation();
  CHECK(c.status_received(gen, 0, 5) == worker_core::resume_outcome::pending);
  CHECK(c.shard_up(0, 2) == worker_core::shard_action::ask_status);  // restored: ask it
  CHECK(c.status_received(gen, 1, 5) == worker_core::resume_outcome::pending);  // shard 0 still to answer
  CHECK(c.status_received(gen, 0, 3) == worker_core::resume_outcome::rollback);
  CHECK(c.rollback_reason() == "restarted worker 7 lost pushes 4..5 that a restored shard needs");
}

TEST_CASE("the window holds a step back until the job widens it") {
  auto c = started(config(consistency_kind::asp, true));
  CHECK(c.phase() == phase::waiting);
  CHECK(c.next_step() == worker_core::step_start::waiting);
  CHECK(!c.widen_window(0));
  CHECK(c.widen_window(1));
  start_next(c);
  run_step(c);
  CHECK(c.phase() == phase::waiting);  // step 1 is outside [0, 1)
  CHECK(!c.widen_window(1));
  CHECK(c.widen_window(3));
  CHECK(c.window() == 3);
  start_next(c);
  CHECK(c.phase() == phase::pulling);
  CHECK(!c.widen_window(2));  // a window never narrows
  CHECK(c.window() == 3);
}

TEST_CASE("a worker without a window never waits") {
  auto c = started();
  CHECK(c.phase() == phase::pulling);
  CHECK(c.next_step() == worker_core::step_start::pull);
}

TEST_CASE("a dense BSP worker may ask for the next step's pull while it pushes, inside the window and the run") {
  auto cfg = config(consistency_kind::bsp, true);
  cfg.dense_only = true;
  cfg.total_steps = 3;
  worker_core c(cfg);
  REQUIRE(resume_with(c, {0, 0}) == worker_core::resume_outcome::start);
  c.widen_window(3);  // before the first step asks: no step waits yet
  start_next(c, {});
  REQUIRE(c.phase() == phase::pulling);
  CHECK(!c.early_pull_request(0));  // not while pulling
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  for (uint32_t i = 0; i < 2; ++i) {
    auto m = c.early_pull_request(i);
    REQUIRE(m);
    auto d = decode(*m);
    REQUIRE(d);
    CHECK(d->root().getClock() == 1);  // the next step's
    CHECK(d->root().getWorker() == 7);
    CHECK(d->root().getShard() == i);
    REQUIRE(d->root().getDense().size() == 1);
    CHECK(d->root().getDense()[0].getBegin() == c.config().parts[i].dense.begin);
    CHECK(d->root().getDense()[0].getEnd() == c.config().parts[i].dense.end);
    CHECK(d->root().getSparseKeys().size() == 0);
  }
  CHECK(!c.early_pull_request(2));  // no such shard
  // Its reply counts once the next step pulls, not before.
  CHECK(!c.accepts_pull_reply(0, 1));
  for (uint32_t i = 0; i < 2; ++i) REQUIRE(c.acked(i, ack(i, 1).root()));
  start_next(c, {});
  CHECK(c.accepts_pull_reply(0, 1));
  run_step(c);  // step 1; step 2 is the last
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  CHECK(!c.early_pull_request(0));  // there is no step 3
}

TEST_CASE("the next step's pull is not asked early under SSP or ASP, for a sparse model, or past the window") {
  for (auto rule : {consistency_kind::ssp, consistency_kind::asp}) {
    auto cfg = config(rule);
    cfg.dense_only = true;
    auto c = started(cfg);
    answer_pulls(c);
    c.begin_push(gradient(c, 1.0f));
    CHECK(!c.early_pull_request(0));
  }
  {
    auto c = started(config(consistency_kind::bsp));  // dense_only false: the next keys are unknown
    answer_pulls(c);
    c.begin_push(gradient(c, 1.0f));
    CHECK(!c.early_pull_request(0));
  }
  auto cfg = config(consistency_kind::bsp, true);
  cfg.dense_only = true;
  worker_core c(cfg);
  REQUIRE(resume_with(c, {0, 0}) == worker_core::resume_outcome::start);
  c.widen_window(1);  // step 0 may run, step 1 not yet
  start_next(c, {});
  REQUIRE(c.phase() == phase::pulling);
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  CHECK(!c.early_pull_request(0));
  CHECK(!c.widen_window(2));  // the step is pushing, not waiting
  CHECK(c.early_pull_request(0));
}

TEST_CASE("a pull asks each shard for its dense range and the batch's sparse keys it owns") {
  auto c = started();
  c.begin_pull({1, 3, 6});
  CHECK(c.phase() == phase::pulling);
  CHECK(c.keys_of(0) == std::vector<uint64_t>{5, 7});  // global key = dense size + sparse key
  CHECK(c.keys_of(1) == std::vector<uint64_t>{10});
  auto req = decode(c.pull_request(1));
  REQUIRE(req);
  auto r = req->root();
  CHECK(r.getWorker() == 7);
  CHECK(r.getShard() == 1);
  CHECK(r.getClock() == 0);
  REQUIRE(r.getDense().size() == 1);
  CHECK(r.getDense()[0].getBegin() == 2);
  CHECK(r.getDense()[0].getEnd() == 4);
  REQUIRE(r.getSparseKeys().size() == 1);
  CHECK(r.getSparseKeys()[0] == 10);
}

TEST_CASE("the step's parameters are the pulled values, sparse values in model-key order") {
  auto c = started();
  c.begin_pull({1, 3, 6});
  REQUIRE(c.pulled(1, reply(c, 1).root()));  // answers arrive in any order
  REQUIRE(c.pulled(0, reply(c, 0).root()));
  auto p = c.parameters();
  REQUIRE(p.dense.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(p.dense[i] == static_cast<float>(i));
  REQUIRE(p.sparse_values.size() == 3);
  CHECK(p.sparse_values[0] == 5.0f);
  CHECK(p.sparse_values[1] == 7.0f);
  CHECK(p.sparse_values[2] == 10.0f);
}

TEST_CASE("a pull reply from a stale generation is ignored") {
  auto c = started();
  auto gen = c.generation();
  CHECK(c.pull_open(gen, 0));
  CHECK(!c.pull_open(gen - 1, 0));
  c.halt();
  CHECK(!c.pull_open(gen, 0));
  auto later = started();
  run_step(later);  // now pulling step 1: step 0's clock is stale
  CHECK(!later.accepts_pull_reply(0, 0));
  CHECK(later.accepts_pull_reply(0, 1));
}

TEST_CASE("a duplicated pull reply counts only while its pull is open") {
  auto c = started();
  auto gen = c.generation();
  CHECK(c.accepts_pull_reply(0, 0));
  CHECK(!c.accepts_pull_reply(0, 1));  // another step's clock
  CHECK(!c.accepts_pull_reply(2, 0));  // no such shard
  REQUIRE(c.pulled(0, reply(c, 0).root()));
  CHECK(!c.pull_open(gen, 0));
  CHECK(!c.accepts_pull_reply(0, 0));
  CHECK(c.pull_open(gen, 1));
}

TEST_CASE(
    "a pull reply with keys outside its shard or too few sparse values is refused, naming the "
    "shard") {
  auto c = started();
  auto wrong_shard = c.pulled(1, reply(c, 0).root());  // shard 0's dense range
  REQUIRE(!wrong_shard);
  CHECK(
      describe(wrong_shard.error()).find("pull reply from shard 1 holds keys outside its range") !=
      std::string::npos);
  c.begin_pull({1, 3, 6});  // shard 0 now owes two sparse values
  auto stale = reply(c, 1);
  c.begin_pull({1, 6, 7});  // shard 1 now owes two, the reply holds one
  auto short_reply = c.pulled(1, stale.root());
  REQUIRE(!short_reply);
  CHECK(describe(short_reply.error()).find("shard 1 has 1 sparse values for 2 keys") !=
        std::string::npos);
  CHECK(!c.done(1));
}

TEST_CASE("a push carries the shard's slice of the gradient with seq step + 1, and is logged") {
  auto c = started();
  answer_pulls(c);
  auto g = gradient(c, 0.0f, 0.25);
  g.dense = {10, 11, 12, 13};
  g.sparse_values = {21, 26};
  auto round = c.begin_push(g);
  CHECK(c.phase() == phase::pushing);
  CHECK(!round.skipped);
  CHECK(c.report().last_loss == 0.25);
  REQUIRE(round.pushes.size() == 2);
  auto p = decode(round.pushes[1]);
  REQUIRE(p);
  auto r = p->root();
  CHECK(r.getSeq() == 1);
  CHECK(r.getStep() == 0);
  CHECK(r.getWorker() == 7);
  CHECK(r.getShard() == 1);
  REQUIRE(r.getDense().size() == 1);
  CHECK(r.getDense()[0].getBegin() == 2);
  float dense[2];
  std::memcpy(dense, r.getDense()[0].getValues().begin(), sizeof dense);
  CHECK(dense[0] == 12.0f);
  CHECK(dense[1] == 13.0f);
  REQUIRE(r.getSparse().getKeys().size() == 1);
  CHECK(r.getSparse().getKeys()[0] == 10);
  CHECK(r.getSparse().getValues()[0] == 26.0f);
  CHECK(c.log().size() == 2);
  CHECK(c.log().first_seq(1) == 1);
}

TEST_CASE("a gradient that is not finite is pushed empty and counted as a skipped step") {
  // A bad sparse value, or a bad dense value in the first or the last shard's
  // slice (the dense values are checked as each shard's push is built).
  for (int where = 0; where < 3; ++where) {
    CAPTURE(where);
    auto c = started();
    answer_pulls(c);
    auto g = gradient(c, 1.0f, 9.0);
    if (where == 0)
      g.sparse_values[1] = std::numeric_limits<float>::quiet_NaN();
    else if (where == 1)
      g.dense.front() = std::numeric_limits<float>::quiet_NaN();
    else
      g.dense.back() = -std::numeric_limits<float>::infinity();
    auto round = c.begin_push(g);
    CHECK(round.skipped);
    CHECK(c.report().skipped_steps == 1);
    CHECK(c.report().last_loss == 0);  // the loss of a skipped step is not reported
    REQUIRE(round.pushes.size() == 2);
    for (auto& m : round.pushes) {
      auto p = decode(m);
      REQUIRE(p);
      CHECK(p->root().getSeq() == 1);
      CHECK(p->root().getDense().size() == 0);
      CHECK(p->root().getSparse().getKeys().size() == 0);
    }
  }
}

TEST_CASE("a step completes when every shard has acknowledged") {
  auto c = started();
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  auto first = c.acked(0, ack(0, 1, Status::ACCEPTED).root());
  REQUIRE(first);
  CHECK(!first->step_complete);
  CHECK(c.step() == 0);
  auto second = c.acked(1, ack(1, 1, Status::APPLIED).root());
  REQUIRE(second);
  CHECK(second->step_complete);
  CHECK(c.step() == 1);
}

TEST_CASE("a duplicate ack counts once") {
  auto c = started();
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  auto gen = c.generation();
  REQUIRE(c.acked(0, ack(0, 1).root()));
  auto again = c.acked(0, ack(0, 1, Status::DUPLICATE).root());
  REQUIRE(again);
  CHECK(!again->step_complete);  // shard 1 has not acknowledged
  CHECK(c.step() == 0);
  CHECK(!c.push_open(gen, 0));
  CHECK(c.push_open(gen, 1));
  auto last = c.acked(1, ack(1, 1).root());
  REQUIRE(last);
  CHECK(last->step_complete);
  auto late = c.acked(1, ack(1, 1, Status::DUPLICATE).root());  // after the step
  REQUIRE(late);
  CHECK(!late->step_complete);
  CHECK(c.step() == 1);
  CHECK(c.max_acked(0) == 1);
}

TEST_CASE("an ack for an earlier push does not complete the current step") {
  auto c = started();
  run_step(c);
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  for (uint32_t i = 0; i < 2; ++i) {
    auto out = c.acked(i, ack(i, 1, Status::DUPLICATE).root());
    REQUIRE(out);
    CHECK(!out->step_complete);
  }
  CHECK(c.step() == 1);
}

TEST_CASE("a shard's refusal of a push fails the worker, naming the shard and its reason") {
  auto c = started();
  answer_pulls(c);
  c.begin_push(gradient(c, 1.0f));
  auto out = c.acked(1, ack(1, 1, Status::REJECTED, 0, "keys outside [2,4)").root());
  REQUIRE(!out);
  CHECK(describe(out.error()).find("shard-1 rejected push 1: keys outside [2,4)") !=
        std::string::npos);
}

