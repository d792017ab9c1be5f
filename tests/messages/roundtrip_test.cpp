#include <vector>

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <doctest/doctest.h>

#include "messages/register_types.hpp"
#include "samples.hpp"

using namespace keel;
using namespace keel::test;

namespace {

// Serializes `m` with CAF's binary serializer and loads it into a fresh msg.
template <class S>
msg<S> through_serializer(const msg<S>& m) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  auto copy = m;
  REQUIRE(!sink(copy));
  msg<S> out;
  caf::binary_deserializer source{nullptr, buf};
  REQUIRE(!source(out));
  return out;
}

template <class S, class Check>
void round_trip(const msg<S>& m, Check&& check) {
  auto local = decode(m);
  REQUIRE_MESSAGE(local, describe(local.error()));
  check(local->root());
  auto remote = through_serializer(m);
  REQUIRE(remote.frame() != m.frame());  // really went through bytes
  auto decoded_remote = decode(remote);
  REQUIRE_MESSAGE(decoded_remote, describe(decoded_remote.error()));
  check(decoded_remote->root());
}

}  // namespace

TEST_CASE("every message type round-trips locally and through CAF's binary serializer") {
  round_trip(sample_push(), [](auto r) { check_push(r); });
  round_trip(sample_push_ack(), [](auto r) {
    CHECK(r.getStatus() == schema::PushAck::Status::DUPLICATE);
    CHECK(r.getShardVersion() == 99);
  });
  round_trip(sample_pull_request(), [](auto r) {
    CHECK(r.getDense().size() == 2);
    CHECK(r.getSparseKeys()[1] == 15);
  });
  round_trip(sample_pull_reply(), [](auto r) {
    CHECK(r.getDense()[0].getValues().size() == 8);
    CHECK(r.getShardVersion() == 5);
  });
  round_trip(sample_snapshot_request(), [](auto r) { CHECK(r.getCheckpoint() == 4); });
  round_trip(sample_shard_snapshot(), [](auto r) {
    CHECK(r.getTensors()[0].getName() == "w");
    CHECK(r.getApplied()[1].getSeq() == 39);
  });
  round_trip(sample_manifest(), [](auto r) { CHECK(r.getShards()[1].getFile() == "shard-1.snap"); });
  round_trip(sample_directory_update(), [](auto r) {
    CHECK(r.getName() == "shard:1");
    CHECK(r.getState() == schema::DirectoryUpdate::State::RESTARTING);
  });
  round_trip(sample_heartbeat(), [](auto r) { CHECK(r.getSeq() == 9); });
  round_trip(sample_node_join(), [](auto r) { CHECK(r.getActorTypes()[1] == "worker"); });
}

TEST_CASE("an empty msg survives serialization as empty and is refused by decode") {
  push_msg empty;
  auto back = through_serializer(empty);
  CHECK(back.empty());
  auto d = decode(back);
  REQUIRE(!d);
  CHECK(describe(d.error()).find("keel.Push: empty message") != std::string::npos);
}

TEST_CASE("a msg sent between local actors arrives without a byte copy") {
  caf::actor_system_config cfg;
  register_message_types(cfg);
  caf::actor_system sys{cfg};
  auto echo = sys.spawn([]() -> caf::behavior {
    return {[](const push_msg& m) { return m; }};
  });
  auto m = sample_push(1 << 18);
  caf::scoped_actor self{sys};
  bool answered = false;
  self->request(echo, std::chrono::seconds(10), m)
    .receive(
      [&](const push_msg& back) {
        answered = true;
        CHECK(back.frame().get() == m.frame().get());
        auto d = decode(back);
        REQUIRE(d);
        check_push(d->root(), 1 << 18);
      },
      [&](caf::error& e) { FAIL(sys.render(e)); });
  CHECK(answered);
  self->send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST_CASE("to_string of a msg summarises it without dumping bytes") {
  auto m = sample_push(4);
  auto text = caf::deep_to_string(m);
  CHECK(text.find("keel.Push") != std::string::npos);
  CHECK(text.find("bytes") != std::string::npos);
}
