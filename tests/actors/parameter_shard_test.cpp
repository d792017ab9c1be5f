// The parameter_shard actor on the real message path: capnp pushes in, acks
// and replies out; a checkpoint write's failure and its part out to the
// checkpointer the directory names.
#include <cerrno>
#include <cstring>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "cli_run.hpp"  // wait_until
#include "job_fixture.hpp"  // temp_dir
#include "storage/faulty_io.hpp"
#include "supervision/directory.hpp"
#include "supervision/protocol.hpp"
#include "two_param_shard.hpp"

using namespace keel;
using Status = schema::PushAck::Status;

namespace {

push_msg push(uint32_t worker, uint64_t seq, float g) {
  return test::two_param_push(worker, seq, g);
}

struct shard_fixture : test::two_param_shard {
  Status send(const push_msg& m) {
    caf::scoped_actor self{*sys};
    Status out = Status::REJECTED;
    self->request(shard, std::chrono::seconds(10), m)
      .receive([&](const push_ack_msg& a) { out = decode(a)->root().getStatus(); },
               [&](caf::error& e) { FAIL(describe(e)); });
    return out;
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

TEST_CASE("pulls of the same keys at the same clock and shard version share one reply, and an update makes a new one") {
  shard_fixture f;
  auto pull = [&](uint64_t clock, uint64_t end) {
    auto req = build<schema::PullRequest>(64, [&](schema::PullRequest::Builder b) {
      b.setWorker(0);
      b.setClock(clock);
      auto r = b.initDense(1)[0];
      r.setBegin(0);
      r.setEnd(end);
    });
    caf::scoped_actor self{*f.sys};
    pull_reply_msg out;
    self->request(f.shard, std::chrono::seconds(10), req)
      .receive([&](const pull_reply_msg& r) { out = r; }, [&](caf::error& e) { FAIL(describe(e)); });
    return out;
  };
  auto value0 = [](const pull_reply_msg& r) {
    auto d = decode(r);
    REQUIRE(d);
    float v = -1;
    std::memcpy(&v, d->root().getDense()[0].getValues().begin(), 4);
    return v;
  };
  auto a = pull(0, 2), b = pull(0, 2);
  REQUIRE(a.frame());
  CHECK(a.frame() == b.frame());  // the same immutable frame: no second copy
  CHECK(pull(1, 2).frame() != a.frame());  // another clock
  CHECK(pull(1, 1).frame() != a.frame());  // other keys
  CHECK(f.send(push(0, 1, -1.0f)) == Status::APPLIED);
  auto c = pull(0, 2);
  CHECK(c.frame() != a.frame());  // a new shard version
  CHECK(value0(a) == 0.0f);
  CHECK(value0(c) == 1.0f);
  CHECK(decode(c)->root().getShardVersion() == decode(a)->root().getShardVersion() + 1);
}

TEST_CASE("a checkpoint write that fails before the shard knows the checkpointer is reported once it does, before the part") {
  test::two_param_shard f;
  test::temp_dir dir;
  auto directory = supervision::spawn_directory(*f.sys);
  auto io = faulty_io::wrap();
  io->arm(io_fault{io_op::write, 1, ENOSPC});
  auto o = test::two_param_shard::config();
  o.snapshot_every_steps = 1;
  o.directory = directory;
  o.checkpoint_dir = dir.path().string();
  o.retry_min = o.retry_max = std::chrono::milliseconds(1);
  parameter_shard_env env;
  env.io = io;
  auto shard = spawn_parameter_shard(*f.sys, std::move(o), std::move(env));
  REQUIRE_MESSAGE(shard, describe(shard.error()));
  caf::scoped_actor self{*f.sys};
  // Checkpoint 1 (step 1): its write fails while no checkpointer is up.
  self->request(*shard, std::chrono::seconds(10), test::two_param_push(0, 1, -1.0f))
    .receive([](const push_ack_msg&) {}, [](caf::error& e) { FAIL(describe(e)); });
  // Its second write (after the backoff) shows the shard has handled the
  // failure: only then does a checkpointer come up.
  REQUIRE(test::wait_until([&] { return io->counts().write >= 2; }, std::chrono::seconds(10)));
  self->send(directory, supervision::register_atom::value,
             supervision::directory_update{"checkpointer", 1, supervision::name_state::up,
                                           caf::actor_cast<caf::actor>(self)});
  std::string failure;
  bool part = false;
  self->receive_while([&] { return !part; })(
    [&](write_failed_atom, uint64_t id, uint32_t shard_index, uint64_t, const std::string& why) {
      CHECK(id == 1);
      CHECK(shard_index == 0);
      failure = why;
    },
    [&](const checkpoint_manifest_msg& m) {
      auto d = decode(m);
      REQUIRE(d);
      CHECK(d->root().getCheckpoint() == 1);
      CHECK_MESSAGE(!failure.empty(), "the part came before the failure, or without it");
      part = true;
    },
    caf::after(std::chrono::seconds(10)) >> [&] { FAIL("neither the failure nor the part came"); });
  CHECK(failure.find("No space left on device") != std::string::npos);
  caf::anon_send_exit(*shard, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(directory, caf::exit_reason::user_shutdown);
}
