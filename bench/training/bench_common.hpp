#pragma once
// What the training benches share: the median of a run's figures, and
// ending the program with a keel error named by what failed.
#include <algorithm>
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

// Prints "PROGRAM: WHAT: error" on stderr and exits 1.
[[noreturn]] inline void fail(const char* program, const std::string& what, const caf::error& e) {
  std::fprintf(stderr, "%s: %s: %s\n", program, what.c_str(), describe(e).c_str());
  std::exit(1);
}

}  // namespace keel::bench
