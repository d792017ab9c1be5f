// Summing a BSP step's table pushes (actors/core/row_block_sum.hpp): the
// in-order float sum per key, keys in order of first appearance, a key twice
// in one push refused.
#include "actors/core/row_block_sum.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace keel;

TEST_CASE("a step's table pushes sum per key in block order, keys in order of first appearance") {
  std::vector<uint64_t> k0 = {5, 9}, k1 = {9, 2, 5}, k2 = {7};
  std::vector<float> g0 = {1e8f, 1.0f, 0.5f, 0.25f};
  std::vector<float> g1 = {0.75f, 1.5f, 3.0f, 4.0f, -1e8f, 1.0f};
  std::vector<float> g2 = {-0.0f, 8.0f};
  std::vector<row_block_view> blocks = {
      {k0.data(), 2, g0.data()}, {k1.data(), 3, g1.data()}, {k2.data(), 1, g2.data()}};
  summed_rows out;
  REQUIRE(!sum_row_blocks(blocks.data(), blocks.size(), 2, out));
  CHECK(out.keys == std::vector<uint64_t>{5, 9, 2, 7});
  // Key 5: (0 + 1e8) + -1e8 = 0 in this order (1 + ... would be lost the other way round).
  std::vector<float> expected = {(0.0f + 1e8f) + -1e8f,
                                 (0.0f + 1.0f) + 1.0f,
                                 (0.0f + 0.5f) + 0.75f,
                                 (0.0f + 0.25f) + 1.5f,
                                 3.0f,
                                 4.0f,
                                 0.0f + -0.0f,
                                 8.0f};
  REQUIRE(out.grads.size() == expected.size());
  CHECK(std::memcmp(out.grads.data(), expected.data(), expected.size() * sizeof(float)) == 0);

  // Reused: the buffers keep their memory.
  const uint64_t* keys_buffer = out.keys.data();
  REQUIRE(!sum_row_blocks(blocks.data(), 2, 2, out));
  CHECK(out.keys == std::vector<uint64_t>{5, 9, 2});
  CHECK(out.keys.data() == keys_buffer);
}

TEST_CASE("a push that carries a key twice is refused by the sum, naming the push") {
  std::vector<uint64_t> k0 = {5}, k1 = {9, 5, 9};
  std::vector<float> g = {1, 1, 1};
  std::vector<row_block_view> blocks = {{k0.data(), 1, g.data()}, {k1.data(), 3, g.data()}};
  summed_rows out;
  auto e = sum_row_blocks(blocks.data(), blocks.size(), 1, out);
  CHECK(e.code == table_errc::duplicate_key);
  CHECK(e.what.find("key 9 twice in push 1") != std::string::npos);
}
