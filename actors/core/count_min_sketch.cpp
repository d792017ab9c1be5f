#include "actors/core/count_min_sketch.hpp"

#include "actors/core/hash_slots.hpp"  // mix64

namespace keel {

count_min_sketch::count_min_sketch(uint32_t depth, uint32_t width, uint64_t seed)
    : depth_(depth),
      width_(width),
      seed_(seed),
      row_seeds_(depth),
      counters_(static_cast<size_t>(depth) * width, 0) {
  while ((uint32_t{1} << width_bits_) < width_) ++width_bits_;
  // splitmix64's own sequence from the seed: one independent constant a row.
  uint64_t state = seed;
  for (auto& s : row_seeds_) {
    state += 0x9e3779b97f4a7c15ULL;
    s = mix64(state);
  }
}

size_t count_min_sketch::cell(uint32_t row, uint64_t key) const {
  // The top bits: mix64's low bits of the key also choose its slot, so a
  // shard's keys share them.
  uint64_t h = mix64(key ^ row_seeds_[row]);
  size_t column = width_bits_ == 0 ? 0 : static_cast<size_t>(h >> (64 - width_bits_));
  return static_cast<size_t>(row) * width_ + column;
}

uint32_t count_min_sketch::estimate(uint64_t key) const {
  uint32_t least = max_count;
  for (uint32_t r = 0; r < depth_; ++r) {
    uint32_t c = counters_[cell(r, key)];
    if (c < least)
      least = c;
  }
  return least;
}

uint32_t count_min_sketch::add(uint64_t key) {
  // Conservative update: only the counters at the current minimum grow, which
  // keeps every estimate >= the true count while overestimating less.
  uint32_t next = estimate(key);
  if (next < max_count)
    ++next;
  for (uint32_t r = 0; r < depth_; ++r) {
    uint16_t& c = counters_[cell(r, key)];
    if (c < next)
      c = static_cast<uint16_t>(next);
  }
  return next;
}

}  // namespace keel
