#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "storage/crc32c.hpp"

using namespace keel;

TEST_CASE("crc32c of \"123456789\" is the standard check value 0xE3069283") {
  const char* s = "123456789";
  CHECK(crc32c(s, 9) == 0xE3069283u);
  CHECK(crc32c_extend_reference(crc32c_empty, s, 9) == 0xE3069283u);
  CHECK(crc32c(s, 0) == crc32c_empty);
}

TEST_CASE("the fast crc32c equals Boost.CRC for every length and alignment, whole or in pieces") {
  // seed 7: input bytes and split points are reproducible.
  std::mt19937 rng(7);
  std::vector<unsigned char> data(100000 + 64);
  for (auto& b : data)
    b = static_cast<unsigned char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    // Up to and past the three 8 KiB blocks the fast path interleaves.
    for (size_t len : {0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 1000, 4096, 24575, 24576, 24577,
                       49152 + 8, 100000}) {
      CAPTURE(offset);
      CAPTURE(len);
      auto whole = crc32c(data.data() + offset, len);
      CHECK(whole == crc32c_extend_reference(crc32c_empty, data.data() + offset, len));
      size_t cut = len == 0 ? 0 : rng() % len;
      auto pieces = crc32c_extend(crc32c(data.data() + offset, cut), data.data() + offset + cut,
                                  len - cut);
      CHECK(pieces == whole);
      auto ref_pieces = crc32c_extend_reference(
        crc32c_extend_reference(crc32c_empty, data.data() + offset, cut),
        data.data() + offset + cut, len - cut);
      CHECK(ref_pieces == whole);
    }
  }
  std::string hw = crc32c_is_hardware_accelerated() ? "yes" : "no";
  MESSAGE("hardware crc32c: " << hw);
}

TEST_CASE("crc32c_combine gives the checksum of the concatenation, for every split") {
  std::mt19937 rng(11);
  std::vector<unsigned char> data(70000);
  for (auto& b : data)
    b = static_cast<unsigned char>(rng());
  for (size_t len : {0, 1, 8, 13, 4096, 24577, 70000}) {
    for (size_t cut : {size_t{0}, len / 3, len / 2, len}) {
      CAPTURE(len);
      CAPTURE(cut);
      auto a = crc32c(data.data(), cut);
      auto b = crc32c(data.data() + cut, len - cut);
      CHECK(crc32c_combine(a, b, len - cut) == crc32c(data.data(), len));
    }
  }
  // Three pieces combined left to right, and a wrong length gives another value.
  auto whole = crc32c(data.data(), 30000);
  auto ab = crc32c_combine(crc32c(data.data(), 1000), crc32c(data.data() + 1000, 9000), 9000);
  CHECK(crc32c_combine(ab, crc32c(data.data() + 10000, 20000), 20000) == whole);
  CHECK(crc32c_combine(ab, crc32c(data.data() + 10000, 20000), 19999) != whole);
}
