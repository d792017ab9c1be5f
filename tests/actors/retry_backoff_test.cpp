// retry_backoff (actors/core/retry_backoff.hpp) is the one retry formula of
// a worker's requests and of a shard's and the checkpointer's writes, built
// on supervision's doubling. Before issue 41 each of them computed it
// itself; these tests hold the shared function to that formula.
#include <chrono>
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include "actors/core/retry_backoff.hpp"

using namespace keel;
using std::chrono::milliseconds;

namespace {

// The formula worker.cpp and checkpoint_coordinator.hpp each had.
milliseconds formula_before(milliseconds retry_min, milliseconds retry_max, uint32_t failures) {
  return std::min(retry_min * (1u << std::min<uint32_t>(failures, 16)), retry_max);
}

}  // namespace

TEST_CASE("retry_backoff gives the values the worker's and the writers' own formulas gave") {
  // The defaults (worker 5..500 ms, writes 100..5000 ms), a cap below the
  // minimum, a zero minimum, and caps beyond 2^16 times the minimum (where
  // the doubling stops at 16).
  std::vector<int64_t> mins = {0, 1, 3, 5, 7, 100, 1000};
  std::vector<int64_t> maxes = {0, 1, 2, 5, 20, 500, 5000, 65536, 1000000, int64_t{1} << 40};
  for (auto lo : mins)
    for (auto hi : maxes)
      for (uint32_t failures = 0; failures <= 40; ++failures) {
        CAPTURE(lo);
        CAPTURE(hi);
        CAPTURE(failures);
        CHECK(retry_backoff(milliseconds(lo), milliseconds(hi), failures).count() ==
              formula_before(milliseconds(lo), milliseconds(hi), failures).count());
      }
  // Far past the cap of 16 doublings: no overflow, the value of 16.
  CHECK(retry_backoff(milliseconds(1), milliseconds(int64_t{1} << 40), UINT32_MAX) == milliseconds(65536));
}

TEST_CASE("retry_backoff starts at retry_min, doubles with each failure and stops at retry_max") {
  auto lo = milliseconds(100);
  auto hi = milliseconds(5000);
  CHECK(retry_backoff(lo, hi, 0) == lo);
  for (uint32_t failures = 1; failures < 20; ++failures) {
    auto before = retry_backoff(lo, hi, failures - 1);
    auto now = retry_backoff(lo, hi, failures);
    CHECK(now == std::min(before * 2, hi));
  }
}
