#pragma once
// Counter-based randomness: every random number keel's models use is a pure
// function of a seed and a tuple of counters (hash(seed, a, b, c)), so any
// worker, shard or test recomputes any value exactly, in any order, with no
// generator state to carry or share. The mixer is SplitMix64's finaliser
// (a bijection on 64-bit words), chained over the tuple; it is a fast
// statistical hash, not a cryptographic one.

#include <cmath>
#include <cstdint>

namespace keel {

// SplitMix64's output function: a bijective 64-bit mixer with full avalanche.
constexpr uint64_t mix64(uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The hash of (seed, a, b, c). Distinct tuples give independent-looking words;
// callers put a distinct constant "stream" tag in one slot per use so that two
// uses of one seed never share numbers.
constexpr uint64_t counter_hash(uint64_t seed, uint64_t a, uint64_t b = 0,
                                uint64_t c = 0) noexcept {
  uint64_t h = mix64(seed);
  h = mix64(h ^ a);
  h = mix64(h ^ (b * 0xd6e8feb86659fd93ULL));
  return mix64(h ^ (c * 0xa0761d6478bd642fULL));
}

// A double uniform in [0, 1) from the top 53 bits of `h`.
constexpr double unit_double(uint64_t h) noexcept {
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
}

// A double uniform in (0, 1] (never 0, so its logarithm is finite).
constexpr double open_unit_double(uint64_t h) noexcept {
  return (static_cast<double>(h >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

// A standard normal deviate from two hash words (Box-Muller, cosine branch).
inline double normal_from(uint64_t h1, uint64_t h2) noexcept {
  const double two_pi = 6.283185307179586476925;
  return std::sqrt(-2.0 * std::log(open_unit_double(h1))) * std::cos(two_pi * unit_double(h2));
}

}  // namespace keel
