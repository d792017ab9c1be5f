// The parameter_shard actor on the real message path: capnp pushes in, acks
// and replies out.
#include <cstring>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/atoms.hpp"
#include "actors/parameter_shard.hpp"
#include "messages/register_types.hpp"
#include "storage/snapshot.hpp"

using namespace keel;
using Status = schema::PushAck::Status;

namespace {

push_msg push(uint32_t worker, uint64_t seq, float g) {
  return build<schema::Push>(64, [&](schema::Push::Builder b) {
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

struct shard_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::actor shard;
  shard_fixture() {
    register_message_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    shard_options o;
    o.config.num_workers = 1;
    o.config.dense = {0, 2};
    o.config.rule = {consistency_kind::asp, 0};
    o.config.optimizer.lr = 1.0f;
    o.initial_dense = {0.0f, 0.0f};
    auto s = spawn_parameter_shard(*sys, std::move(o));
    REQUIRE(s);
    shard = *s;
  }
  ~shard_fixture() { caf::anon_send_exit(shard, caf::exit_reason::user_shutdown); }

  Status send(const push_msg& m) {
    caf::scoped_actor self{*sys};
    Status out = Status::REJECTED;
    self->request(shard, std::chrono::seconds(10), m)
      .receive([&](const push_ack_msg& a) { out = decode(a)->root().getStatus(); },
               [&](caf::error& e) { FAIL(describe(e)); });
    return out;
  }

  float param0() {
    caf::scoped_actor self{*sys};
    float v[2] = {-1, -1};
    self->request(shard, std::chrono::seconds(10), params_atom::value)
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

}  // namespace

TEST_CASE("a shard actor applies a duplicated push once and acknowledges both") {
  shard_fixture f;
  auto m = push(0, 1, -1.0f);
  CHECK(f.send(m) == Status::APPLIED);
  CHECK(f.send(m) == Status::DUPLICATE);
  CHECK(f.param0() == 1.0f);
  CHECK(f.send(push(0, 2, -1.0f)) == Status::APPLIED);
  CHECK(f.param0() == 2.0f);
}

TEST_CASE("a shard actor answers a malformed push with an error and keeps serving") {
  shard_fixture f;
  auto bad = build<schema::Push>(64, [](schema::Push::Builder b) {
    b.setWorker(0);
    b.setSeq(1);
    auto r = b.initDense(1)[0];
    r.setBegin(0);
    r.setEnd(2);
    r.initValues(3);  // 3 bytes for 2 floats
  });
  caf::scoped_actor self{*f.sys};
  bool refused = false;
  self->request(f.shard, std::chrono::seconds(10), bad)
    .receive([&](const push_ack_msg&) { FAIL("accepted a malformed push"); },
             [&](caf::error& e) {
               refused = true;
               CHECK(describe(e).find("keel.Push.dense[0].values") != std::string::npos);
             });
  CHECK(refused);
  CHECK(f.send(push(0, 1, -3.0f)) == Status::APPLIED);
  CHECK(f.param0() == 3.0f);
}
