#include "models/zipf_sampler.hpp"

#include <cmath>

namespace keel {

namespace {

// (e^t - 1) / t, continuous at t = 0 (where H's two forms meet).
double expm1_over(double t) noexcept {
  return std::abs(t) > 1e-8 ? std::expm1(t) / t : 1.0 + t * 0.5;
}

// ln(1 + t) / t, continuous at t = 0.
double log1p_over(double t) noexcept {
  return std::abs(t) > 1e-8 ? std::log1p(t) / t : 1.0 - t * 0.5;
}

}  // namespace

zipf_sampler::zipf_sampler(uint64_t n, double s) noexcept : n_(n), s_(s) {
  h_first_ = h_integral(1.5) - 1.0;
  h_top_ = h_integral(static_cast<double>(n) + 0.5);
  squeeze_ = 2.0 - h_inverse(h_integral(2.5) - density(2.0));
}

// H(x) = (x^(1-s) - 1) / (1 - s) written as ln x * expm1_over((1 - s) ln x),
// exact in the limit s -> 1 (where H is ln x).
double zipf_sampler::h_integral(double x) const noexcept {
  const double lx = std::log(x);
  return lx * expm1_over((1.0 - s_) * lx);
}

// H^-1(u) = (1 + (1 - s) u)^(1 / (1 - s)) = exp(u * log1p_over((1 - s) u));
// (1 - s) u stays above -1 on the hat's range, clamped against rounding.
double zipf_sampler::h_inverse(double u) const noexcept {
  double t = (1.0 - s_) * u;
  if (t < -1.0 + 1e-15)
    t = -1.0 + 1e-15;
  return std::exp(u * log1p_over(t));
}

double zipf_sampler::density(double x) const noexcept {
  return std::exp(-s_ * std::log(x));
}

double zipf_sampler::probability(uint64_t k) const noexcept {
  if (k < 1 || k > n_)
    return 0;
  double norm = 0;
  for (uint64_t j = n_; j >= 1; --j) norm += density(static_cast<double>(j));  // small terms first
  return density(static_cast<double>(k)) / norm;
}

}  // namespace keel
