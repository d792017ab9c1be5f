#pragma once
// One well-formed sample of every protocol message, and a check that a
// decoded message equals its sample, for round-trip tests.

#include <cstring>
#include <vector>

#include <doctest/doctest.h>

#include "messages/decode.hpp"
#include "messages/protocol.hpp"

namespace keel::test {

inline std::vector<float> ramp(size_t n, float scale = 0.5f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(i % 1000) - 3.0f;
  return v;
}

// A push with one dense range of `n_dense` values at [100, 100+n) and three sparse keys.
inline push_msg sample_push(size_t n_dense = 16, uint64_t seq = 7) {
  auto values = ramp(n_dense);
  return build<schema::Push>(n_dense / 2 + 64, [&](schema::Push::Builder b) {
    b.setWorker(3);
    b.setSeq(seq);
    b.setStep(41);
    b.setShard(1);
    auto dense = b.initDense(1);
    dense[0].setBegin(100);
    dense[0].setEnd(100 + n_dense);
    auto data = dense[0].initValues(n_dense * 4);
    std::memcpy(data.begin(), values.data(), n_dense * 4);
    auto sparse = b.initSparse();
    auto keys = sparse.initKeys(3);
    auto vals = sparse.initValues(3);
    uint64_t k[] = {5, 1000000, 1u << 30};
    for (unsigned i = 0; i < 3; ++i) {
      keys.set(i, k[i] + 100 + n_dense);
      vals.set(i, 0.25f * static_cast<float>(i + 1));
    }
  });
}

inline void check_push(schema::Push::Reader r, size_t n_dense = 16, uint64_t seq = 7) {
  CHECK(r.getWorker() == 3);
  CHECK(r.getSeq() == seq);
  CHECK(r.getStep() == 41);
  REQUIRE(r.getDense().size() == 1);
  auto d = r.getDense()[0];
  CHECK(d.getBegin() == 100);
  CHECK(d.getEnd() == 100 + n_dense);
  auto expect = ramp(n_dense);
  REQUIRE(d.getValues().size() == n_dense * 4);
  CHECK(std::memcmp(d.getValues().begin(), expect.data(), n_dense * 4) == 0);
  REQUIRE(r.getSparse().getKeys().size() == 3);
  CHECK(r.getSparse().getValues()[2] == 0.75f);
}

inline push_ack_msg sample_push_ack() {
  return build<schema::PushAck>(64, [](schema::PushAck::Builder b) {
    b.setWorker(3);
    b.setSeq(7);
    b.setShard(1);
    b.setShardVersion(99);
    b.setStatus(schema::PushAck::Status::DUPLICATE);
  });
}

inline pull_request_msg sample_pull_request() {
  return build<schema::PullRequest>(64, [](schema::PullRequest::Builder b) {
    b.setWorker(2);
    b.setShard(0);
    b.setClock(12);
    auto d = b.initDense(2);
    d[0].setBegin(0);
    d[0].setEnd(10);
    d[1].setBegin(20);
    d[1].setEnd(30);
    auto k = b.initSparseKeys(2);
    k.set(0, 11);
    k.set(1, 15);
  });
}

inline pull_reply_msg sample_pull_reply() {
  return build<schema::PullReply>(64, [](schema::PullReply::Builder b) {
    b.setShard(0);
    b.setClock(12);
    b.setShardVersion(5);
    auto d = b.initDense(1);
    d[0].setBegin(0);
    d[0].setEnd(2);
    auto v = d[0].initValues(8);
    float f[] = {1.5f, -2.5f};
    std::memcpy(v.begin(), f, 8);
  });
}

inline snapshot_request_msg sample_snapshot_request() {
  return build<schema::SnapshotRequest>(16, [](schema::SnapshotRequest::Builder b) {
    b.setCheckpoint(4);
    b.setShard(1);
  });
}

inline shard_snapshot_msg sample_shard_snapshot() {
  return build<schema::ShardSnapshot>(256, [](schema::ShardSnapshot::Builder b) {
    b.setMagic(schema::SNAPSHOT_MAGIC);
    b.setFormatVersion(1);
    b.setShard(1);
    b.setCheckpoint(4);
    b.setStep(40);
    b.setShardVersion(80);
    auto a = b.initApplied(2);
    a[0].setWorker(0);
    a[0].setSeq(40);
    a[1].setWorker(1);
    a[1].setSeq(39);
    auto t = b.initTensors(1);
    t[0].setName("w");
    t[0].setDtype(schema::DType::FLOAT32);
    auto shape = t[0].initShape(2);
    shape.set(0, 2);
    shape.set(1, 3);
    auto chunks = t[0].initChunks(2);
    chunks.init(0, 16);
    chunks.init(1, 8);
    auto s = b.initSections(1);
    s[0].setName("optimizer");
    s[0].initData(3);
  });
}

inline checkpoint_manifest_msg sample_manifest() {
  return build<schema::CheckpointManifest>(64, [](schema::CheckpointManifest::Builder b) {
    b.setCheckpoint(4);
    b.setStep(40);
    auto s = b.initShards(2);
    s[0].setShard(0);
    s[0].setFile("shard-0.snap");
    s[1].setShard(1);
    s[1].setFile("shard-1.snap");
  });
}

inline directory_update_msg sample_directory_update() {
  return build<schema::DirectoryUpdate>(32, [](schema::DirectoryUpdate::Builder b) {
    b.setName("shard:1");
    b.setIncarnation(3);
    b.setState(schema::DirectoryUpdate::State::RESTARTING);
  });
}

inline heartbeat_msg sample_heartbeat() {
  return build<schema::Heartbeat>(16, [](schema::Heartbeat::Builder b) {
    b.setNode("node-a");
    b.setSeq(9);
  });
}

inline node_join_msg sample_node_join() {
  return build<schema::NodeJoin>(32, [](schema::NodeJoin::Builder b) {
    b.setNode("node-b");
    b.setHost("127.0.0.1");
    b.setPort(4242);
    b.setPid(1234);
    auto t = b.initActorTypes(2);
    t.set(0, "shard");
    t.set(1, "worker");
  });
}


}  // namespace keel::test
