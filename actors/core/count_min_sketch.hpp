#pragma once
// A count-min sketch (Cormode & Muthukrishnan, 2005) with conservative
// update (Estan & Varghese, 2002): how many times each 64-bit key has been
// seen, in fixed memory (depth x width 16-bit counters) whatever the number
// of distinct keys. An estimate is never below the true count (counters
// saturate at 65535) and exceeds it only through collisions. The row hashes
// are mix64 of the key xor a per-row constant drawn from `seed`, so two
// sketches of the same seed and shape given the same keys in any order hold
// the same counters: what an embedding table's admission filter needs to
// stay deterministic and to travel in a snapshot. A plain value.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace keel {

class count_min_sketch {
 public:
  static constexpr uint32_t max_count = 65535;

  // `width` must be a power of two and `depth` at least 1 (the table's
  // configuration checks both before building one).
  count_min_sketch(uint32_t depth, uint32_t width, uint64_t seed);
  count_min_sketch() = default;

  // Counts one sighting of `key`; returns the estimate after it.
  uint32_t add(uint64_t key);
  // The estimated number of sightings of `key`.
  uint32_t estimate(uint64_t key) const;

  uint32_t depth() const { return depth_; }
  uint32_t width() const { return width_; }
  uint64_t seed() const { return seed_; }
  // The counters, row after row (what a snapshot stores).
  const std::vector<uint16_t>& counters() const { return counters_; }
  std::vector<uint16_t>& counters() { return counters_; }
  size_t bytes() const { return counters_.capacity() * sizeof(uint16_t); }

 private:
  size_t cell(uint32_t row, uint64_t key) const;

  uint32_t depth_ = 0;
  uint32_t width_ = 0;
  uint32_t width_bits_ = 0;
  uint64_t seed_ = 0;
  std::vector<uint64_t> row_seeds_;
  std::vector<uint16_t> counters_;
};

}  // namespace keel
