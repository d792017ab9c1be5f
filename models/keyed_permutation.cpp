#include "models/keyed_permutation.hpp"

#include "models/counter_rng.hpp"

namespace keel {

keyed_permutation::keyed_permutation(uint64_t n, uint64_t key) noexcept : n_(n) {
  for (int r = 0; r < rounds; ++r) round_keys_[r] = counter_hash(key, static_cast<uint64_t>(r));
  // The Feistel domain is 2^(2h) for the smallest h with 2^(2h) >= n, so
  // cycle-walking needs fewer than four steps on average.
  unsigned half = 1;
  while (half < 31 && (uint64_t{1} << (2 * half)) < n) ++half;
  half_bits_ = half;
  half_mask_ = (uint64_t{1} << half) - 1;
}

uint64_t keyed_permutation::encrypt(uint64_t x) const noexcept {
  uint64_t left = x >> half_bits_;
  uint64_t right = x & half_mask_;
  for (int r = 0; r < rounds; ++r) {
    const uint64_t f = mix64(round_keys_[r] ^ right) & half_mask_;
    const uint64_t next_right = left ^ f;
    left = right;
    right = next_right;
  }
  return (left << half_bits_) | right;
}

uint64_t keyed_permutation::decrypt(uint64_t y) const noexcept {
  uint64_t left = y >> half_bits_;
  uint64_t right = y & half_mask_;
  for (int r = rounds - 1; r >= 0; --r) {
    const uint64_t prev_right = left;
    const uint64_t prev_left = right ^ (mix64(round_keys_[r] ^ left) & half_mask_);
    left = prev_left;
    right = prev_right;
  }
  return (left << half_bits_) | right;
}

uint64_t keyed_permutation::operator()(uint64_t x) const noexcept {
  if (n_ <= 1)
    return 0;
  // Encrypting is a bijection of the whole domain, so repeatedly encrypting an
  // in-range value returns to the range before it could cycle back to itself.
  uint64_t y = encrypt(x);
  while (y >= n_) y = encrypt(y);
  return y;
}

uint64_t keyed_permutation::inverse(uint64_t y) const noexcept {
  if (n_ <= 1)
    return 0;
  uint64_t x = decrypt(y);
  while (x >= n_) x = decrypt(x);
  return x;
}
}  // namespace keel
