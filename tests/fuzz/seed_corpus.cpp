#include "seed_corpus.hpp"

#include "table_delta_input.hpp"

#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <utility>

#include <caf/binary_serializer.hpp>

#include "actors/core/shard_snapshot.hpp"
#include "actors/core/update_rules.hpp"
#include "memory_io.hpp"
#include "messages/protocol.hpp"
#include "protocol_schemas.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/sealed_file.hpp"
#include "storage/snapshot.hpp"
#include "table_delta_input.hpp"

namespace keel::fuzz {

namespace fs = std::filesystem;

namespace {

// The stream encoding of a frame.
seed_file encoded(const frame_ptr& f) {
  seed_file out(f->encoded_size_bytes());
  f->encode_to(out.data());
  return out;
}

seed_file with_selector(unsigned char selector, const seed_file& rest) {
  seed_file out(1 + rest.size());
  out[0] = selector;
  if (!rest.empty())
    std::memcpy(out.data() + 1, rest.data(), rest.size());
  return out;
}

std::vector<float> values(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(i) - 1.0f;
  return v;
}

void set_floats(capnp::Data::Builder out, const std::vector<float>& v) {
  std::memcpy(out.begin(), v.data(), v.size() * 4);
}

// One message of each schema, and a few shapes of the ones with lists.
struct message_seed {
  std::string name;
  size_t schema;
  frame_ptr frame;
};

template <class S, class Fill>
message_seed seed(std::string name, size_t hint_words, Fill&& fill) {
  return {std::move(name), schema_index<S>(), build<S>(hint_words, std::forward<Fill>(fill)).frame()};
}

std::vector<message_seed> message_seeds() {
  std::vector<message_seed> out;
  out.push_back(seed<schema::Push>("push-dense-sparse", 64, [](schema::Push::Builder b) {
    b.setWorker(1);
    b.setSeq(3);
    b.setStep(2);
    auto d = b.initDense(2);
    d[0].setBegin(0);
    d[0].setEnd(4);
    set_floats(d[0].initValues(16), values(4, 0.5f));
    d[1].setBegin(10);
    d[1].setEnd(12);
    set_floats(d[1].initValues(8), values(2, 0.25f));
    auto keys = b.getSparse().initKeys(2);
    keys.set(0, 20);
    keys.set(1, 31);
    auto vals = b.getSparse().initValues(2);
    vals.set(0, 0.5f);
    vals.set(1, -2.0f);
  }));
  // A small hint makes the builder spill into more segments.
  out.push_back(seed<schema::Push>("push-multi-segment", 1, [](schema::Push::Builder b) {
    b.setSeq(1);
    auto d = b.initDense(1);
    d[0].setBegin(100);
    d[0].setEnd(164);
    set_floats(d[0].initValues(256), values(64, 0.125f));
  }));
  out.push_back(seed<schema::PushAck>("push-ack-rejected", 16, [](schema::PushAck::Builder b) {
    b.setSeq(4);
    b.setStatus(schema::PushAck::Status::REJECTED);
    b.setReason("range [8,9) is not this shard's");
  }));
  out.push_back(seed<schema::PushAck>("push-ack-out-of-order", 16, [](schema::PushAck::Builder b) {
    b.setSeq(9);
    b.setStatus(schema::PushAck::Status::OUT_OF_ORDER);
    b.setExpectedSeq(5);
  }));
  out.push_back(seed<schema::PullRequest>("pull-request", 32, [](schema::PullRequest::Builder b) {
    b.setClock(3);
    auto d = b.initDense(2);
    d[0].setBegin(0);
    d[0].setEnd(8);
    d[1].setBegin(16);
    d[1].setEnd(24);
    auto k = b.initSparseKeys(3);
    k.set(0, 8);
    k.set(1, 9);
    k.set(2, 40);
  }));
  out.push_back(seed<schema::PullReply>("pull-reply", 32, [](schema::PullReply::Builder b) {
    b.setClock(3);
    b.setShardVersion(12);
    auto d = b.initDense(1);
    d[0].setBegin(4);
    d[0].setEnd(7);
    set_floats(d[0].initValues(12), values(3, 2.0f));
    b.getSparse().initKeys(1).set(0, 9);
    b.getSparse().initValues(1).set(0, 1.5f);
  }));
  out.push_back(seed<schema::SnapshotRequest>("snapshot-request", 8, [](schema::SnapshotRequest::Builder b) {
    b.setCheckpoint(2);
    b.setShard(1);
  }));
  out.push_back(seed<schema::ShardSnapshot>("shard-snapshot", 64, [](schema::ShardSnapshot::Builder b) {
    b.setMagic(schema::SNAPSHOT_MAGIC);
    b.setFormatVersion(1);
    b.setShard(1);
    auto a = b.initApplied(2);
    a[0].setWorker(0);
    a[0].setSeq(5);
    a[1].setWorker(2);
    a[1].setSeq(7);
    auto t = b.initTensors(2);
    t[0].setName("w");
    t[0].setDtype(schema::DType::FLOAT32);
    auto shape = t[0].initShape(2);
    shape.set(0, 2);
    shape.set(1, 2);
    auto chunks = t[0].initChunks(2);
    chunks.init(0, 8);
    chunks.init(1, 8);
    t[1].setName("b");
    t[1].setDtype(schema::DType::UINT8);
    t[1].initShape(1).set(0, 3);
    t[1].initChunks(1).init(0, 3);
    auto s = b.initSections(1);
    s[0].setName("optimizer");
    s[0].initData(4);
  }));
  out.push_back(seed<schema::CheckpointManifest>("checkpoint-manifest", 32, [](schema::CheckpointManifest::Builder b) {
    b.setCheckpoint(2);
    b.setStep(20);
    auto s = b.initShards(2);
    s[0].setShard(0);
    s[0].setFile("ckpt-2.shard-0.snap");
    s[1].setShard(1);
    s[1].setFile("ckpt-2.shard-1.snap");
  }));
  out.push_back(seed<schema::DirectoryUpdate>("directory-update", 16, [](schema::DirectoryUpdate::Builder b) {
    b.setName("shard:0");
    b.setIncarnation(2);
    b.setState(schema::DirectoryUpdate::State::UP);
    b.setNode("node-1");
  }));
  out.push_back(seed<schema::Heartbeat>("heartbeat", 16, [](schema::Heartbeat::Builder b) {
    b.setNode("node-1");
    b.setSeq(17);
    b.setSentUnixMs(1700000000000);
  }));
  out.push_back(seed<schema::NodeJoin>("node-join", 32, [](schema::NodeJoin::Builder b) {
    b.setNode("node-2");
    b.setHost("10.0.0.2");
    b.setPort(7000);
    b.setPid(42);
    auto types = b.initActorTypes(3);
    types.set(0, "shard");
    types.set(1, "worker");
    types.set(2, "checkpointer");
  }));

  return out;
}

template <class S>
seed_file caf_bytes(const frame_ptr& f) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  msg<S> m(f);
  if (sink(m))
    throw std::runtime_error("seed corpus: CAF cannot save a message");
  return seed_file(buf.begin(), buf.end());
}

std::map<std::string, seed_file> caf_seeds(const std::vector<message_seed>& messages) {
  std::map<std::string, seed_file> out;
  for (auto& m : messages)
    visit_schema(m.schema, [&](auto tag) {
      using S = typename decltype(tag)::type;
      out[m.name] = with_selector(static_cast<unsigned char>(m.schema), caf_bytes<S>(m.frame));
    });
  out["push-empty"] = with_selector(static_cast<unsigned char>(schema_index<schema::Push>()),
                                    caf_bytes<schema::Push>(nullptr));
  return out;
}

// A shard with some of everything a snapshot records.
shard_core sample_shard(uint32_t shard, optimizer_kind kind, uint64_t dense, uint32_t workers) {
  shard_config cfg;
  cfg.shard = shard;
  cfg.num_workers = workers;
  cfg.dense = {0, dense};
  cfg.sparse = {dense, std::numeric_limits<uint64_t>::max()};
  cfg.optimizer.kind = kind;
  shard_core::state s;
  s.dense = values(dense, 0.5f);
  if (slots_per_parameter(kind) >= 1)
    s.slot1 = values(dense, 0.125f);
  if (slots_per_parameter(kind) >= 2)
    s.slot2 = values(dense, 0.0625f);
  s.sparse[dense + 3] = {1.0f, 0.5f, 0.25f};
  s.sparse[dense + 40] = {-1.0f, 0.0f, 2.0f};
  for (uint32_t w = 0; w < workers; ++w) {
    s.applied.push_back(10 + w);
    s.worker_clock.push_back(5 + w);
  }
  s.version = 30;
  s.bsp_clock = 5;
  s.optimizer_steps = 5;
  return std::move(*shard_core::restored(cfg, std::move(s)));  // s.dense has `dense` values
}

// The sealed file bytes of a snapshot or manifest written through memory_io.
seed_file stored_file(memory_io& io, const fs::path& p) {
  auto* bytes = io.get(p);
  if (bytes == nullptr)
    throw std::runtime_error("seed corpus: " + p.string() + " was not written");
  return *bytes;
}

seed_file payload_of(const seed_file& file) {
  return seed_file(file.begin() + static_cast<std::ptrdiff_t>(sealed_header_bytes), file.end());
}

std::map<std::string, seed_file> snapshot_seeds() {
  struct variant {
    const char* name;
    shard_core core;
    uint8_t optimizer_bits;
  };
  variant variants[] = {
    {"sgd-8-dense-2-workers", sample_shard(0, optimizer_kind::sgd, 8, 2), 0 << 2},
    {"adam-4-dense-3-workers", sample_shard(2, optimizer_kind::adam, 4, 3), 3 << 2},
  };
  std::map<std::string, seed_file> out;
  memory_io io;
  for (auto& v : variants) {
    auto snap = snapshot_of(v.core, 7, 1700000000000);
    if (!snap)
      throw std::runtime_error("seed corpus: " + describe(snap.error()));
    auto written = write_snapshot_file(io, "/seed", v.name, *snap, "seed");
    if (!written)
      throw std::runtime_error("seed corpus: " + describe(written.error()));
    auto file = stored_file(io, fs::path("/seed") / v.name);
    out[std::string(v.name) + ".file"] = with_selector(v.optimizer_bits, file);
    out[std::string(v.name) + ".payload"] = with_selector(v.optimizer_bits | 1, payload_of(file));
  }
  // A snapshot with a section and tensors no shard has: read, then refused by restore.
  auto w = values(6, 1.0f);
  auto section = std::string("lr=0.1");
  auto other = make_snapshot({3, 7, 70, 140, {{0, 9}, {1, 8}}, 1700000000000, "", "", "", 0, 0},
                             {{"w", schema::DType::FLOAT32, {2, 3}, w.data(), w.size() * 4}},
                             {{"optimizer", section.data(), section.size()}}, 8);
  if (!other || !write_snapshot_file(io, "/seed", "other", *other, "seed"))
    throw std::runtime_error("seed corpus: cannot write the sectioned snapshot");
  out["sections-and-small-chunks.file"] = with_selector(0, stored_file(io, "/seed/other"));
  return out;
}

std::map<std::string, seed_file> manifest_seeds() {
  std::map<std::string, seed_file> out;
  memory_io io;
  checkpoint_manifest none{3, 30, 1700000000000, {}, {}};
  checkpoint_manifest three{4, 40, 1700000000000,
                            {{0, "ckpt-4.shard-0.snap", 1024, 0x1234, 0, 0, {}},
                             {1, "ckpt-4.shard-1.snap", 2048, 0x5678, 0, 0, {{2, "ckpt-2.shard-1.snap", 4096, 7}}},
                             {5, "ckpt-4.shard-5.snap", 512, 0x9abc, 0, 0, {}}},
                            {}};
  for (auto& [name, m] : {std::pair{"empty", none}, std::pair{"three-shards", three}}) {
    if (auto err = write_manifest_file(io, "/seed", name, m, "seed"))
      throw std::runtime_error("seed corpus: " + describe(err));
    auto file = stored_file(io, fs::path("/seed") / name);
    out[std::string(name) + ".file"] = with_selector(0, file);
    out[std::string(name) + ".payload"] = with_selector(1, payload_of(file));
  }
  return out;
}

// Pushes and a pull for the small shard of shard_messages_target.cpp (dense
// keys [0, 16384), sparse keys from 16384), with its flag byte in front.
std::map<std::string, seed_file> shard_message_seeds() {
  constexpr unsigned char pull = 1, asp = 2, adam = 3 << 2;
  auto push = [](uint32_t worker, uint64_t begin, uint64_t end, uint64_t key) {
    return build<schema::Push>(64, [&](schema::Push::Builder b) {
             b.setWorker(worker);
             b.setSeq(1);
             auto d = b.initDense(1);
             d[0].setBegin(begin);
             d[0].setEnd(end);
             set_floats(d[0].initValues(static_cast<unsigned>((end - begin) * 4)),
                        values(end - begin, 0.25f));
             b.getSparse().initKeys(1).set(0, key);
             b.getSparse().initValues(1).set(0, 0.5f);
           })
      .frame();
  };
  auto request = build<schema::PullRequest>(32, [](schema::PullRequest::Builder b) {
    auto d = b.initDense(2);
    d[0].setBegin(0);
    d[0].setEnd(8);
    d[1].setBegin(16);
    d[1].setEnd(24);
    auto k = b.initSparseKeys(2);
    k.set(0, 16384);
    k.set(1, 17000);
  });
  return {{"push-asp-sgd", with_selector(asp, encoded(push(2, 0, 6, 16390)))},
          {"push-bsp-adam", with_selector(adam, encoded(push(0, 100, 108, 20000)))},
          {"pull-request-asp", with_selector(pull | asp, encoded(request.frame()))}};
}

// A delta of each kind of parent table (table_delta_input.hpp), resealed
// by the harness or not.
std::map<std::string, seed_file> table_delta_seeds() {
  return {{"sgd", delta_seed(0)},
          {"sgd-resealed", delta_seed(1)},
          {"capacity-adam", delta_seed(2 | 8)},
          {"admission", delta_seed(4 | 1)},
          {"capacity-admission-adam", delta_seed(2 | 4 | 8)},
          {"capacity-lfu-resealed", delta_seed(2 | 16 | 1)},
          {"capacity-lfu-admission-adam", delta_seed(2 | 4 | 8 | 16)}};
}

}  // namespace

std::map<std::string, std::map<std::string, seed_file>> seed_corpus() {
  auto messages = message_seeds();
  std::map<std::string, seed_file> frames;
  for (auto& m : messages)
    frames[m.name] = with_selector(static_cast<unsigned char>(m.schema), encoded(m.frame));
  return {{"fuzz_frame_decode", frames},
          {"fuzz_caf_deserialize", caf_seeds(messages)},
          {"fuzz_snapshot_file", snapshot_seeds()},
          {"fuzz_manifest_file", manifest_seeds()},
          {"fuzz_shard_messages", shard_message_seeds()},
          {"fuzz_table_delta", table_delta_seeds()}};
}

void write_seed_corpus(const fs::path& dir) {
  for (auto& [target, files] : seed_corpus()) {
    fs::remove_all(dir / target);
    fs::create_directories(dir / target);
    for (auto& [name, bytes] : files) {
      std::ofstream out(dir / target / name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      if (!out)
        throw std::runtime_error("seed corpus: cannot write " + (dir / target / name).string());
    }
  }
}

}  // namespace keel::fuzz
