#pragma once
// worker_core without an actor, the fixture of worker_core_test.cpp and
// worker_core_log_test.cpp: two shards, four dense keys and eight sparse
// keys (shard 0 owns dense [0,2) and sparse keys 0..3, shard 1 dense [2,4)
// and sparse keys 4..7), worker 7 in epoch 3, and the steps of its protocol
// played by hand (pulls answered, pushes acknowledged, logs cut).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "actors/core/worker_core.hpp"
#include "messages/decode.hpp"

namespace keel::test {

using Status = schema::PushAck::Status;
using phase = worker_phase;

inline constexpr uint64_t dense_size = 4;

inline worker_core_config config(consistency_kind rule = consistency_kind::asp, bool windowed = false) {
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
inline worker_core::resume_outcome resume_with(worker_core& c, std::vector<uint64_t> received) {
  for (uint32_t i = 0; i < c.num_shards(); ++i) c.shard_up(i, 1);
  REQUIRE(c.phase() == phase::resuming);
  auto gen = c.generation();
  auto out = worker_core::resume_outcome::pending;
  for (uint32_t i = 0; i < received.size(); ++i) out = c.status_received(gen, i, received[i]);
  return out;
}

// What the worker does after resuming or completing a step: start the next
// one if the core lets it (the batch's sparse keys are `keys`).
inline void start_next(worker_core& c, const std::vector<uint64_t>& keys = {1, 6}) {
  if (c.next_step() == worker_core::step_start::pull)
    c.begin_pull(keys);
}

// A fresh worker, resumed at step 0 and pulling it.
inline worker_core started(worker_core_config cfg = config()) {
  worker_core c(std::move(cfg));
  REQUIRE(resume_with(c, {0, 0}) == worker_core::resume_outcome::start);
  start_next(c);
  return c;
}

// The shard's answer to the open pull: every key's value is the key itself.
inline decoded<schema::PullReply> reply(const worker_core& c, uint32_t shard) {
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

inline decoded<schema::PushAck> ack(uint32_t shard, uint64_t seq, Status status = Status::APPLIED,
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

inline gradient_buffer gradient(const worker_core& c, float value, double loss = 0.5) {
  gradient_buffer g;
  g.dense.assign(dense_size, value);
  g.sparse_values.assign(c.parameters().sparse_keys.size(), value);
  g.loss = loss;
  return g;
}

// Every shard answers the open pull.
inline void answer_pulls(worker_core& c) {
  REQUIRE(c.phase() == phase::pulling);
  for (uint32_t i = 0; i < c.num_shards(); ++i) {
    auto all = c.pulled(i, reply(c, i).root());
    REQUIRE(all);
    CHECK(*all == (i + 1 == c.num_shards()));
  }
}

// Finishes the step being pulled: pull replies, pushes, every shard's ack;
// then starts the next step.
inline void run_step(worker_core& c) {
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

inline std::vector<uint64_t> seqs(const std::vector<push_msg>& pushes) {
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
inline void cut_log(worker_core& c, uint32_t shard, uint64_t covered) {
  c.checkpoint_committed(shard, covered);
  c.checkpoint_committed(shard, covered);
}

}  // namespace keel::test
