#pragma once
// What the benches share: the median of a run's figures, milliseconds
// since a time point, and ending the program with a keel error named by
// what failed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "messages/errors.hpp"

namespace keel::bench {

// The median (upper middle) of `v`; NaN when empty.
inline double median(std::vector<double> v) {
  if (v.empty())
    return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Milliseconds from `t0` to now, on the steady clock.
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Prints "PROGRAM: WHAT: error" on stderr and exits 1.
[[noreturn]] inline void fail(const char* program, const std::string& what, const caf::error& e) {
  std::fprintf(stderr, "%s: %s: %s\n", program, what.c_str(), describe(e).c_str());
  std::exit(1);
}

}  // namespace keel::bench
