#include "invariant.hpp"

#include <cstdio>
#include <cstdlib>

namespace keel::fuzz {

void invariant_broken(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: invariant broken: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace keel::fuzz
