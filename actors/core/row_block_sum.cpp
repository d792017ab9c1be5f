#include "actors/core/row_block_sum.hpp"

#include <string>

#include "actors/core/hash_slots.hpp"  // mix64

namespace keel {

namespace {

constexpr uint32_t empty = 0xffffffffu;

// A set at most half full of all the blocks' keys.
uint32_t bits_for(const row_block_view* blocks, size_t count) {
  size_t total = 0;
  for (size_t b = 0; b < count; ++b) total += blocks[b].n;
  uint32_t bits = 1;
  while ((size_t{1} << bits) < 2 * total) ++bits;
  return bits;
}

}  // namespace

table_error sum_row_blocks(const row_block_view* blocks, size_t count, uint32_t dim,
                           summed_rows& out) {
  const uint32_t bits = bits_for(blocks, count);
  out.scratch.assign(size_t{1} << bits, empty);
  out.keys.clear();
  out.grads.clear();
  out.last_block.clear();
  const size_t mask = out.scratch.size() - 1;
  for (size_t b = 0; b < count; ++b) {
    const row_block_view& block = blocks[b];
    for (size_t i = 0; i < block.n; ++i) {
      const uint64_t key = block.keys[i];
      size_t at = static_cast<size_t>(mix64(key) >> (64 - bits));
      while (out.scratch[at] != empty && out.keys[out.scratch[at]] != key) at = (at + 1) & mask;
      uint32_t row = out.scratch[at];
      if (row == empty) {
        row = static_cast<uint32_t>(out.keys.size());
        out.scratch[at] = row;
        out.keys.push_back(key);
        out.last_block.push_back(static_cast<uint32_t>(b));
        out.grads.resize(out.grads.size() + dim, 0.0f);
      } else if (out.last_block[row] == b) {
        return table_error(
            table_errc::duplicate_key,
            "key " + std::to_string(key) + " twice in push " + std::to_string(b) + " of a sum");
      } else {
        out.last_block[row] = static_cast<uint32_t>(b);
      }
      float* sum = out.grads.data() + size_t{row} * dim;
      const float* g = block.grads + i * dim;
      for (uint32_t j = 0; j < dim; ++j) sum[j] += g[j];
    }
  }
  return {};
}

}  // namespace keel
