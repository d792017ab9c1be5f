#pragma once
// A parameter shard actor of two dense parameters (ASP, one worker, SGD
// with lr 1, both starting at 0) in an actor system of its own, and pushes
// for it: what the shard actor's tests and the data plane's tests drive.

#include <cstring>
#include <memory>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/core/atoms.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "messages/register_types.hpp"
#include "storage/snapshot.hpp"

namespace keel::test {

// Worker `worker`'s push `seq` (step seq - 1) of gradient g for both
// parameters, addressed to the shard incarnation of fencing epoch `epoch`
// (0: none named).
inline push_msg two_param_push(uint32_t worker, uint64_t seq, float g, uint64_t epoch = 0) {
  return build<schema::Push>(64, [&](schema::Push::Builder b) {
    b.setShardEpoch(epoch);
    b.setWorker(worker);
    b.setSeq(seq);
    b.setStep(seq - 1);
    auto r = b.initDense(1)[0];
    r.setBegin(0);
    r.setEnd(2);
    float v[2] = {g, g};
    std::memcpy(r.initValues(8).begin(), v, 8);
  });
}

struct two_param_shard {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor shard;

  // `epoch`: the shard's fencing epoch (0: unfenced).
  explicit two_param_shard(uint64_t epoch = 0) {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    shard = spawn(epoch);
  }

  // The shard's configuration, of fencing epoch `epoch`, at its initial
  // values.
  static parameter_shard_config config(uint64_t epoch = 0) {
    parameter_shard_config o;
    o.epoch = epoch;
    o.core.num_workers = 1;
    o.core.dense = {0, 2};
    o.core.rule = {consistency_kind::asp, 0};
    o.core.optimizer.lr = 1.0f;
    o.initial_dense = {0.0f, 0.0f};
    return o;
  }

  // Another incarnation of the same shard in the same system (its
  // successor or predecessor), at its initial values.
  caf::actor spawn(uint64_t epoch) {
    auto s = spawn_parameter_shard(*sys, config(epoch));
    REQUIRE(s);
    return *s;
  }
  ~two_param_shard() { caf::anon_send_exit(shard, caf::exit_reason::user_shutdown); }

  // The first parameter's value now, read from the shard (or `of`).
  float param0() { return param0(shard); }
  float param0(const caf::actor& of) {
    caf::scoped_actor self{*sys};
    float v[2] = {-1, -1};
    self->request(of, std::chrono::seconds(10), params_atom::value)
      .receive(
        [&](const shard_snapshot_msg& m) {
          auto d = decode(m);
          REQUIRE(d);
          for (auto t : d->root().getTensors())
            if (t.getName() == "dense")
              REQUIRE(!copy_tensor(t, v, sizeof(v)));
        },
        [&](caf::error& e) { FAIL(describe(e)); });
    return v[0];
  }
};

}  // namespace keel::test
