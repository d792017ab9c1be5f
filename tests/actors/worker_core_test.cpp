// worker_core without an actor: two shards, four dense keys and eight
// sparse keys (shard 0 owns dense [0,2) and sparse keys 0..3, shard 1 dense
// [2,4) and sparse keys 4..7), worker 7 in epoch 3.
#include "actors/core/worker_core.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "messages/decode.hpp"

using namespace keel;
using Status = schema::PushAck::Status;
using phase = worker_phase;

namespace {

constexpr uint64_t dense_size = 4;

worker_core_config config(consistency_kind rule = consistency_kind::asp, bool windowed = false) {
  worker_core_config c;
  c.worker = 7;
  c.epoch = 3;
  c.parts = partition_keys(dense_size, 8, 2);
  c.shard_names = {"shard-0", "shard-1"};
  c.dense_size = dense_size;
  c.total_steps = 10;
  c.steps_per_epoch = 4;
  c.rule = rule;
  c.windowed = windowed;
  return c;
}

// Every shard is named once and answers the status request with `received`.
worker_core::resume_outcome resume_with(worker_core& c, std::vector<uint64_t> received) {
  for (uint32_t i = 0; i < c.num_shards(); ++i) c.shard_up(i, 1);
  REQUIRE(c.phase() == phase::resuming);
  auto gen = c.generation();
  auto out = worker_core::resume_outcome::pending;
  for (uint32_t i = 0; i < received.size(); ++i) out = c.status_received(gen, i, received[i]);
  return out;
}

// What the worker does after resuming or completing a step: start the next
// one if the core lets it (the batch's sparse keys are `keys`).
void start_next(worker_core& c, const std::vector<uint64_t>& keys = {1, 6}) {
  if (c.next_step() == worker_core::step_start::pull)
    c.begin_pull(keys);
}

// A fresh worker, resumed at step 0 and pulling it.
worker_core started(worker_core_config cfg = config()) {
  worker_core c(std::move(cfg));
  REQUIRE(resume_with(c, {0, 0}) == worker_core::resume_outcome::start);
  start_next(c);
  return c;
}

// The shard's answer to the open pull: every key's value is the key itself.
decoded<schema::PullReply> reply(const worker_core& c, uint32_t shard) {
  auto range = c.config().parts[shard].dense;
  auto& keys = c.keys_of(shard);
  auto m = build<schema::PullReply>(256, [&](schema::PullReply::Builder b) {
    b.setShard(shard);
    b.setClock(c.step());
    auto d = b.initDense(1)[0];
    d.setBegin(range.begin);
    d.setEnd(range.end);
    std::vector<float> v;
    for (auto k = range.begin; k < range.end; ++k) v.push_back(static_cast<float>(k));
    std::memcpy(d.initValues(v.size() * 4).begin(), v.data(), v.size() * 4);
    auto s = b.initSparse();
    auto sk = s.initKeys(keys.size());
    auto sv = s.initValues(keys.size());
    for (unsigned i = 0; i < keys.size(); ++i) {
      sk.set(i, keys[i]);
      sv.set(i, static_cast<float>(keys[i]));
    }
  });
  auto d = decode(m);
  REQUIRE_MESSAGE(d, describe(d.error()));
  return std::move(*d);
}

decoded<schema::PushAck> ack(uint32_t shard, uint64_t seq, Status status = Status::APPLIED,
                             uint64_t expected = 0, std::string reason = "", uint64_t epoch = 0) {
  auto m = build<schema::PushAck>(64, [&](schema::PushAck::Builder b) {
    b.setShardEpoch(epoch);
    b.setWorker(7);
    b.setShard(shard);
    b.setSeq(seq);
    b.setStatus(status);
    b.setExpectedSeq(expected);
    b.setReason(reason);
  });
  auto d = decode(m);
  REQUIRE_MESSAGE(d, describe(d.error()));
  return std::move(*d);
}

gradient_buffer gradient(const worker_core& c, float value, double loss = 0.5) {
  gradient_buffer g;
  g.dense.assign(dense_size, value);
  g.sparse_values.assign(c.parameters().sparse_keys.size(), value);
  g.loss = loss;
  return g;
}

// Every shard answers the open pull.
void answer_pulls(worker_core& c) {
  REQUIRE(c.phase() == phase::pulling);
  for (uint32_t i = 0; i < c.num_shards(); ++i) {
    auto all = c.pulled(i, reply(c, i).root());
    REQUIRE(all);
    CHECK(*all == (i + 1 == c.num_shards()));
  }
}

// Finishes the step being pulled: pull replies, pushes, every shard's ack;
// then starts the next step.
void run_step(worker_core& c) {
  answer_pulls(c);
  auto seq = c.step() + 1;
  c.begin_push(gradient(c, 1.0f));
  for (uint32_t i = 0; i < c.num_shards(); ++i) {
    auto out = c.acked(i, ack(i, seq).root());
    REQUIRE(out);
    CHECK(out->step_complete == (i + 1 == c.num_shards()));
  }
  REQUIRE(c.step() == seq);
  start_next(c);
}

std::vector<uint64_t> seqs(const std::vector<push_msg>& pushes) {
  std::vector<uint64_t> out;
  for (auto& m : pushes) {
    auto d = decode(m);
    REQUIRE(d);
    out.push_back(d->root().getSeq());
  }
  return out;
}

// Two checkpoints covering `covered`: the log keeps what lies after the
// previous checkpoint's cover, so only the second one cuts it there.
void cut_log(worker_core& c, uint32_t shard, uint64_t covered) {
  c.checkpoint_committed(shard, covered);
  c.checkpoint_committed(shard, covered);
}

}  // namespace

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
