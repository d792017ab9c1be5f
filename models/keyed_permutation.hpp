#pragma once
// A keyed_permutation is a pseudo-random bijection of [0, n) chosen by a
// 64-bit key, evaluated one element at a time in O(1) expected time and no
// memory (a 4-round Feistel network over the smallest even-width bit domain
// holding n, with cycle-walking back into range). Batch orders and the
// scattering of popular sparse keys use it instead of a stored shuffle. It is
// an immutable value: copies and concurrent use from many threads are safe.

#include <cstdint>

namespace keel {

class keyed_permutation {
 public:
  // The permutation of [0, n) chosen by `key`; n must be at least 1 and below 2^62.
  keyed_permutation(uint64_t n, uint64_t key) noexcept;

  // The image of `x` (which must be below size()); distinct inputs give distinct outputs.
  uint64_t operator()(uint64_t x) const noexcept;

  // The preimage of `y` (below size()): inverse(operator()(x)) == x.
  uint64_t inverse(uint64_t y) const noexcept;

  uint64_t size() const noexcept { return n_; }

 private:
  uint64_t encrypt(uint64_t x) const noexcept;
  uint64_t decrypt(uint64_t y) const noexcept;

  static constexpr int rounds = 4;

  uint64_t n_;
  uint64_t round_keys_[rounds];  // one Feistel round function key per round
  unsigned half_bits_;
  uint64_t half_mask_;
};

}  // namespace keel
