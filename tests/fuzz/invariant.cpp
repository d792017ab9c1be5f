#include "invariant.hpp"

namespace keel::fuzz {

invariant_violation::invariant_violation(const char* target, const std::string& what)
    : std::logic_error(std::string(target) + ": invariant broken: " + what) {}

void invariant_broken(const char* target, const std::string& what) {
  throw invariant_violation(target, what);
}

}  // namespace keel::fuzz
