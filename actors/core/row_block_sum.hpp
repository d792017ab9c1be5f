#pragma once
// Sums the gradient rows several pushes carry for one embedding table into
// one block of unique keys: what a BSP shard applies once a step's pushes
// from every worker are in (actors/core/shard_core.hpp sums dense gradients
// the same way). Blocks are summed in the order given, worker-id order under
// BSP, so the result does not depend on arrival order: the gradient of a key
// is ((0 + g_first) + g_second) + ..., over the blocks that carry it, the
// in-order float addition dense parameters use. The summed keys come in
// order of first appearance (block by block). The output's buffers are
// reused across calls: no allocation per key once warm. A plain function.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "actors/core/table_error.hpp"

namespace keel {

// One push's rows for a table: n keys, each with `dim` gradient floats.
struct row_block_view {
  const uint64_t* keys = nullptr;
  size_t n = 0;
  const float* grads = nullptr;  // n x dim, row i for keys[i]
};

// The summed block; keep one and reuse it.
struct summed_rows {
  std::vector<uint64_t> keys;
  std::vector<float> grads;          // keys.size() x dim
  std::vector<uint32_t> scratch;     // the open-addressing set of keys
  std::vector<uint32_t> last_block;  // per summed key, the last block that carried it
};

// Sums `count` blocks of rows of `dim` floats into `out`. Refuses
// (duplicate_key) a block that carries a key twice, naming the block; out
// is then unspecified. Gradients are not checked here (each push's were when
// it arrived: embedding_table::apply checks them again).
table_error sum_row_blocks(const row_block_view* blocks, size_t count, uint32_t dim,
                           summed_rows& out);

}  // namespace keel
