#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "samples.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::vector<unsigned char> encode(const frame_ptr& f) {
  std::vector<unsigned char> bytes(f->encoded_size_bytes());
  f->encode_to(bytes.data());
  return bytes;
}

// Decodes bytes as a Push: either a frame/decoding error, or a valid push.
caf::expected<decoded<schema::Push>> decode_bytes(const std::vector<unsigned char>& bytes, size_t n) {
  auto f = frame::parse_copy(bytes.data(), n, *buffer_pool::process_default());
  if (!f)
    return f.error();
  return decode<schema::Push>(*f);
}

std::string error_text(const caf::error& e) {
  return describe(e);
}

template <class Fill>
push_msg push_with(Fill&& fill) {
  return build<schema::Push>(256, [&](schema::Push::Builder b) {
    b.setWorker(1);
    b.setSeq(1);
    fill(b);
  });
}

void set_dense(schema::DenseRange::Builder r, uint64_t b, uint64_t e, std::vector<float> v) {
  r.setBegin(b);
  r.setEnd(e);
  auto data = r.initValues(v.size() * 4);
  if (!v.empty())  // memcpy from an empty vector's null data is undefined
    std::memcpy(data.begin(), v.data(), v.size() * 4);
}

void expect_refused(const push_msg& m, const std::string& fragment) {
  auto d = decode(m);
  REQUIRE_MESSAGE(!d, "accepted a push that should name: " << fragment);
  CHECK_MESSAGE(error_text(d.error()).find(fragment) != std::string::npos,
                error_text(d.error()) << " does not name " << fragment);
}

}  // namespace

TEST_CASE("a push truncated at any word boundary is refused, never read out of bounds") {
  auto bytes = encode(sample_push(64).frame());
  for (size_t n = 0; n < bytes.size(); n += 8) {
    auto r = decode_bytes(bytes, n);
    CHECK_MESSAGE(!r, "truncated at " << n << " of " << bytes.size() << " bytes");
  }
  CHECK(decode_bytes(bytes, bytes.size()));
}

TEST_CASE("random bytes and random bit flips never crash decoding") {
  std::mt19937_64 rng(20261202);
  auto good = encode(sample_push(32).frame());
  size_t refused = 0;
  for (int i = 0; i < 3000; ++i) {
    auto bytes = good;
    if (i % 2 == 0) {
      for (auto& b : bytes)
        b = static_cast<unsigned char>(rng());
      // Keep a plausible segment table so the reader itself is exercised.
      uint32_t table[2] = {0, static_cast<uint32_t>(bytes.size() / 8 - 1)};
      std::memcpy(bytes.data(), table, 8);
    } else {
      for (int flips = 0; flips < 4; ++flips)
        bytes[8 + rng() % (bytes.size() - 8)] ^= static_cast<unsigned char>(1u << (rng() % 8));
    }
    auto r = decode_bytes(bytes, bytes.size());
    if (!r)
      ++refused;
    else
      CHECK(r->root().getSeq() >= 1);  // whatever was accepted satisfies the contract
  }
  CHECK(refused > 1000);
}

TEST_CASE("a message with an unknown protocol version is refused, naming the version") {
  auto m = push_with([](auto b) { b.setVersion(7); });
  auto d = decode(m);
  REQUIRE(!d);
  CHECK(is(d.error(), errc::unsupported_version));
  CHECK(error_text(d.error()).find("keel.Push.version: 7") != std::string::npos);
  auto zero = push_with([](auto b) { b.setVersion(0); });
  CHECK(!decode(zero));
}

TEST_CASE("inconsistent dense ranges are refused with the field named") {
  expect_refused(push_with([](auto b) { set_dense(b.initDense(1)[0], 0, 4, {1, 2, 3}); }),
                 "keel.Push.dense[0].values: 12 bytes");
  expect_refused(push_with([](auto b) { set_dense(b.initDense(1)[0], 5, 5, {}); }),
                 "keel.Push.dense[0]: empty or inverted range [5,5)");
  expect_refused(push_with([](auto b) {
                   auto d = b.initDense(2);
                   set_dense(d[0], 0, 4, {1, 2, 3, 4});
                   set_dense(d[1], 2, 3, {1});
                 }),
                 "keel.Push.dense[1]: range [2,3) overlaps");
  float nan = std::numeric_limits<float>::quiet_NaN();
  expect_refused(push_with([&](auto b) { set_dense(b.initDense(1)[0], 0, 2, {1, nan}); }),
                 "contains a NaN or infinite value");
  float inf = std::numeric_limits<float>::infinity();
  expect_refused(push_with([&](auto b) { set_dense(b.initDense(1)[0], 0, 2, {inf, 1}); }),
                 "contains a NaN or infinite value");
}

TEST_CASE("inconsistent sparse blocks are refused with the field named") {
  expect_refused(push_with([](auto b) {
                   auto s = b.initSparse();
                   auto k = s.initKeys(3);
                   for (unsigned i = 0; i < 3; ++i)
                     k.set(i, i);
                   s.initValues(2);
                 }),
                 "keel.Push.sparse: 3 keys but 2 values");
  expect_refused(push_with([](auto b) {
                   auto s = b.initSparse();
                   auto k = s.initKeys(2);
                   k.set(0, 9);
                   k.set(1, 9);
                   s.initValues(2);
                 }),
                 "keel.Push.sparse.keys[1]: key 9 is not greater");
  expect_refused(push_with([](auto b) {
                   set_dense(b.initDense(1)[0], 10, 12, {1, 2});
                   auto s = b.initSparse();
                   s.initKeys(1).set(0, 11);
                   s.initValues(1);
                 }),
                 "sparse key 11 lies inside dense range [10,12)");
  expect_refused(push_with([](auto b) {
                   auto s = b.initSparse();
                   s.initKeys(1).set(0, 1);
                   s.initValues(1).set(0, std::nanf(""));
                 }),
                 "keel.Push.sparse.values[0]: is NaN");
}

TEST_CASE("a push with seq 0 is refused: workers count from 1") {
  expect_refused(push_with([](auto b) { b.setSeq(0); }), "keel.Push.seq");
}

TEST_CASE("oversized lists are refused against the receiver's limits") {
  decode_limits tight;
  tight.max_sparse_keys = 4;
  auto m = push_with([](auto b) {
    auto s = b.initSparse();
    auto k = s.initKeys(5);
    for (unsigned i = 0; i < 5; ++i)
      k.set(i, i);
    s.initValues(5);
  });
  auto d = decode(m, tight);
  REQUIRE(!d);
  CHECK(is(d.error(), errc::limit_exceeded));
  CHECK(error_text(d.error()).find("5 entries exceed the limit of 4") != std::string::npos);
  CHECK(decode(m));  // the default limits accept it
}

TEST_CASE("a message that claims more data than its frame holds hits the traversal limit, not memory") {
  decode_limits tight;
  tight.traversal_limit_factor = 0;  // limit of 1024 words
  auto big = sample_push(1 << 14);   // 64 KiB of values = 8192 words
  auto d = decode(big, tight);
  REQUIRE(!d);
  CHECK(is(d.error(), errc::malformed_message));
}

TEST_CASE("snapshots, manifests and control messages enforce their contracts") {
  auto snap = build<schema::ShardSnapshot>(128, [](auto b) {
    b.setMagic(schema::SNAPSHOT_MAGIC);
    b.setFormatVersion(1);
    auto t = b.initTensors(1);
    t[0].setName("w");
    t[0].initShape(1).set(0, 4);
    t[0].initChunks(1).init(0, 12);
  });
  auto d1 = decode(snap);
  REQUIRE(!d1);
  CHECK(error_text(d1.error()).find("tensors['w']: chunks hold 12 bytes, shape and dtype need 16") !=
        std::string::npos);

  auto bad_magic = build<schema::ShardSnapshot>(32, [](auto b) { b.setFormatVersion(1); });
  CHECK(error_text(decode(bad_magic).error()).find("magic") != std::string::npos);

  auto manifest = build<schema::CheckpointManifest>(64, [](auto b) {
    auto s = b.initShards(1);
    s[0].setFile("../etc/passwd");
  });
  auto d2 = decode(manifest);
  REQUIRE(!d2);
  CHECK(error_text(d2.error()).find("is not a plain file name") != std::string::npos);
  auto chained = build<schema::CheckpointManifest>(64, [](auto b) {
    auto s = b.initShards(1);
    s[0].setFile("ckpt-2.shard-0.snap");
    s[0].initChain(1)[0].setFile("../../etc/shadow");
  });
  auto d3 = decode(chained);
  REQUIRE(!d3);
  CHECK(error_text(d3.error()).find("shards[0].chain[0].file: '../../etc/shadow' is not a plain file name") !=
        std::string::npos);

  auto join = build<schema::NodeJoin>(32, [](auto b) {
    b.setNode("n");
    b.setHost("h");
  });
  CHECK(error_text(decode(join).error()).find("keel.NodeJoin.port") != std::string::npos);

  auto dir = build<schema::DirectoryUpdate>(32, [](auto) {});
  CHECK(error_text(decode(dir).error()).find("keel.DirectoryUpdate.name: must not be empty") !=
        std::string::npos);

  auto ack = build<schema::PushAck>(32, [](auto b) {
    b.setSeq(1);
    b.setStatus(schema::PushAck::Status::REJECTED);
  });
  CHECK(error_text(decode(ack).error()).find("keel.PushAck.reason") != std::string::npos);
}

TEST_CASE("a push whose values were checked as they were copied in is still refused for a NaN, and decodes when finite") {
  auto make = [](const std::vector<float>& v, bool* finite) {
    frame_builder fb(64);
    auto b = fb.message().initRoot<schema::Push>();
    b.setVersion(schema::PROTOCOL_VERSION);
    b.setWorker(1);
    b.setSeq(1);
    auto d = b.initDense(1)[0];
    d.setBegin(0);
    d.setEnd(v.size());
    d.adoptValues(fb.copy_floats(v.data(), v.size(), finite));
    return push_msg(fb.finish());
  };
  std::vector<float> v(5000, 0.25f);
  bool finite = false;
  auto good = make(v, &finite);
  CHECK(finite);
  CHECK(decode(good));
  auto again = decode_bytes(encode(good.frame()), good.frame()->encoded_size_bytes());
  CHECK(again);  // the same bytes from elsewhere are scanned, and pass
  v[4097] = std::numeric_limits<float>::quiet_NaN();
  auto bad = make(v, &finite);
  CHECK_FALSE(finite);
  expect_refused(bad, "contains a NaN or infinite value");
  expect_refused(push_msg(*frame::parse_copy(encode(bad.frame()).data(), bad.frame()->encoded_size_bytes(),
                                             *buffer_pool::process_default())),
                 "contains a NaN or infinite value");
}
