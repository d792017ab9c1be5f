#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include <doctest/doctest.h>

#include "messages/buffer_pool.hpp"
#include "messages/errors.hpp"
#include "messages/frame.hpp"

using namespace keel;

TEST_CASE("a buffer given back to its pool is handed out again") {
  auto pool = buffer_pool::create();
  capnp::word* first = nullptr;
  {
    auto b = pool->acquire(1000);
    CHECK(b.size_words() >= 1000);
    first = b.words();
  }
  auto again = pool->acquire(1000);
  CHECK(again.words() == first);
  CHECK(pool->stats().reused == 1);
  CHECK(pool->stats().acquired == 2);
}

TEST_CASE("a pool keeps no more idle memory than its limit") {
  auto pool = buffer_pool::create(64 * 1024);
  {
    std::vector<pooled_buffer> held;
    for (int i = 0; i < 8; ++i)
      held.push_back(pool->acquire(2048));  // 16 KiB each
  }
  CHECK(pool->stats().cached_bytes <= 64 * 1024);
  CHECK(pool->stats().cached_bytes > 0);
}

TEST_CASE("a pool with a buffer count keeps the largest buffers given back, so an outgrown size goes") {
  auto pool = buffer_pool::create(buffer_pool::default_max_cached_bytes, 1);
  auto small = pool->acquire(1000);
  auto large = pool->acquire(5000);
  small = pooled_buffer();
  CHECK(pool->stats().cached_bytes == 1024 * sizeof(capnp::word));
  large = pooled_buffer();  // displaces the small one
  CHECK(pool->stats().cached_bytes == 8192 * sizeof(capnp::word));
  { auto small = pool->acquire(1000); }  // not kept: smaller than the idle one
  CHECK(pool->stats().cached_bytes == 8192 * sizeof(capnp::word));
  auto reused = pool->stats().reused;
  large = pool->acquire(5000);
  CHECK(pool->stats().reused == reused + 1);
  CHECK(pool->stats().cached_bytes == 0);
}

TEST_CASE("a buffer outliving its pool is freed, not returned") {
  pooled_buffer b;
  {
    auto pool = buffer_pool::create();
    b = pool->acquire(10);
  }
  CHECK(static_cast<bool>(b));
  b = pooled_buffer();  // must not touch the destroyed pool (ASan checks)
  CHECK(!b);
}

TEST_CASE("a multi-segment frame encodes and parses back to the same words") {
  frame_builder fb(64);  // small first segment forces more segments
  auto root = fb.message().initRoot<capnp::AnyPointer>();
  auto data = root.initAs<capnp::Data>(100000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<unsigned char>(i * 7);
  auto f = fb.finish();
  REQUIRE(f->segments().size() >= 2);
  std::vector<unsigned char> bytes(f->encoded_size_bytes());
  f->encode_to(bytes.data());
  auto parsed = frame::parse_copy(bytes.data(), bytes.size(), *buffer_pool::process_default());
  REQUIRE(parsed);
  REQUIRE((*parsed)->segments().size() == f->segments().size());
  for (size_t i = 0; i < f->segments().size(); ++i) {
    auto a = f->segments()[i];
    auto b = (*parsed)->segments()[i];
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.begin(), b.begin(), a.size() * 8) == 0);
  }
}

TEST_CASE("a frame whose segment table disagrees with its length is refused, naming the sizes") {
  std::vector<uint32_t> words = {0, 5, 0, 0};  // one segment of 5 words, but only 1 present
  auto r = frame::parse_copy(words.data(), words.size() * 4, *buffer_pool::process_default());
  REQUIRE(!r);
  CHECK(is(r.error(), errc::malformed_message));
  CHECK(describe(r.error()).find("segment table says 5 words") != std::string::npos);
}

TEST_CASE("a frame of odd length or absurd segment count is refused") {
  unsigned char odd[12] = {};
  auto r1 = frame::parse_copy(odd, sizeof(odd), *buffer_pool::process_default());
  REQUIRE(!r1);
  CHECK(describe(r1.error()).find("multiple of 8") != std::string::npos);
  uint32_t many[2] = {100000, 0};
  auto r2 = frame::parse_copy(many, sizeof(many), *buffer_pool::process_default());
  REQUIRE(!r2);
  CHECK(describe(r2.error()).find("exceeds 512") != std::string::npos);
}

TEST_CASE("data adopted into a frame is referenced in place and survives encoding") {
  auto pool = buffer_pool::create();
  auto buf = pool->acquire(4);
  std::memset(buf.bytes(), 0xff, buf.size_bytes());
  const char text[] = "gradient bytes";  // 15 bytes: one byte of padding follows
  std::memcpy(buf.bytes(), text, sizeof(text));
  const unsigned char* where = buf.bytes();
  frame_builder fb(64, pool);
  fb.message().initRoot<capnp::AnyPointer>().adopt(fb.adopt_data(std::move(buf), sizeof(text)));
  auto f = fb.finish();

  capnp::SegmentArrayMessageReader local(f->segments());
  auto d = local.getRoot<capnp::AnyPointer>().getAs<capnp::Data>();
  CHECK(d.begin() == where);
  CHECK(std::memcmp(d.begin(), text, sizeof(text)) == 0);

  std::vector<unsigned char> bytes(f->encoded_size_bytes());
  f->encode_to(bytes.data());
  CHECK(bytes.back() == 0);  // padding zeroed, not 0xff
  auto parsed = frame::parse_copy(bytes.data(), bytes.size(), *pool);
  REQUIRE(parsed);
  capnp::SegmentArrayMessageReader remote((*parsed)->segments());
  auto d2 = remote.getRoot<capnp::AnyPointer>().getAs<capnp::Data>();
  REQUIRE(d2.size() == sizeof(text));
  CHECK(std::memcmp(d2.begin(), text, sizeof(text)) == 0);
}

TEST_CASE("copied data gets a pooled buffer of its own, its padding zeroed, and does not follow its source") {
  auto pool = buffer_pool::create();
  {  // leave a buffer full of 0xff in the pool: copy_data must not show its bytes
    auto dirty = pool->acquire(8);
    std::memset(dirty.bytes(), 0xff, dirty.size_bytes());
  }
  char text[] = "gradient bytes";  // 15 bytes: one byte of padding follows
  frame_builder fb(64, pool);
  fb.message().initRoot<capnp::AnyPointer>().adopt(fb.copy_data(text, sizeof(text)));
  auto f = fb.finish();
  text[0] = 'G';
  CHECK(pool->stats().reused >= 1);

  capnp::SegmentArrayMessageReader local(f->segments());
  auto d = local.getRoot<capnp::AnyPointer>().getAs<capnp::Data>();
  REQUIRE(d.size() == sizeof(text));
  CHECK(d.begin() != reinterpret_cast<const unsigned char*>(text));
  CHECK(std::memcmp(d.begin(), "gradient bytes", sizeof(text)) == 0);
  std::vector<unsigned char> bytes(f->encoded_size_bytes());
  f->encode_to(bytes.data());
  CHECK(bytes.back() == 0);
  auto parsed = frame::parse_copy(bytes.data(), bytes.size(), *pool);
  REQUIRE(parsed);
  capnp::SegmentArrayMessageReader remote((*parsed)->segments());
  auto d2 = remote.getRoot<capnp::AnyPointer>().getAs<capnp::Data>();
  CHECK(std::memcmp(d2.begin(), "gradient bytes", sizeof(text)) == 0);
}

TEST_CASE("adopting more bytes than the buffer holds is refused") {
  auto pool = buffer_pool::create();
  frame_builder fb(64, pool);
  auto buf = pool->acquire(1);
  auto n = buf.size_bytes() + 1;
  CHECK_THROWS_AS(fb.adopt_data(std::move(buf), n), std::invalid_argument);
}

namespace {

// A frame whose root is `values` copied in with frame_builder::copy_floats.
frame_ptr floats_copied_in(const std::shared_ptr<buffer_pool>& pool, const std::vector<float>& values,
                           bool* finite) {
  frame_builder fb(64, pool);
  fb.message().initRoot<capnp::AnyPointer>().adopt(fb.copy_floats(values.data(), values.size(), finite));
  return fb.finish();
}

}  // namespace

TEST_CASE("float values found finite as they are copied in are known finite to their frame, not to a parse of its bytes") {
  auto pool = buffer_pool::create();
  std::vector<float> values(10000);  // more than one block of the scan
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 7.0f;
  bool finite = false;
  auto f = floats_copied_in(pool, values, &finite);
  CHECK(finite);
  capnp::SegmentArrayMessageReader local(f->segments());
  auto d = local.getRoot<capnp::AnyPointer>().getAs<capnp::Data>();
  REQUIRE(d.size() == values.size() * 4);
  CHECK(std::memcmp(d.begin(), values.data(), d.size()) == 0);
  CHECK(f->known_finite(d.begin(), d.size()));
  CHECK(f->known_finite(d.begin() + 400, 800));
  CHECK_FALSE(f->known_finite(d.begin() + 4, d.size()));  // runs past the values
  CHECK_FALSE(f->known_finite(values.data(), 16));       // not the frame's bytes

  std::vector<unsigned char> bytes(f->encoded_size_bytes());
  f->encode_to(bytes.data());
  auto parsed = frame::parse_copy(bytes.data(), bytes.size(), *pool);
  REQUIRE(parsed);
  capnp::SegmentArrayMessageReader remote((*parsed)->segments());
  auto d2 = remote.getRoot<capnp::AnyPointer>().getAs<capnp::Data>();
  REQUIRE(d2.size() == d.size());
  CHECK_FALSE((*parsed)->known_finite(d2.begin(), d2.size()));
}

TEST_CASE("float values with a NaN or an infinity are copied whole but not known finite") {
  auto pool = buffer_pool::create();
  for (size_t bad : {size_t{0}, size_t{4095}, size_t{4096}, size_t{9999}}) {
    CAPTURE(bad);
    std::vector<float> values(10000, 1.0f);
    values[bad] = bad % 2 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    bool finite = true;
    auto f = floats_copied_in(pool, values, &finite);
    CHECK_FALSE(finite);
    capnp::SegmentArrayMessageReader local(f->segments());
    auto d = local.getRoot<capnp::AnyPointer>().getAs<capnp::Data>();
    REQUIRE(d.size() == values.size() * 4);
    CHECK(std::memcmp(d.begin(), values.data(), d.size()) == 0);
    CHECK_FALSE(f->known_finite(d.begin(), d.size()));
  }
}
