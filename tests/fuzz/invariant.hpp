#pragma once
// How a fuzz target reports a broken invariant: it prints the target and the
// property that failed to stderr and aborts, so libFuzzer saves the input as
// a crash and the replay test's process fails with the message. A decoder
// that merely refuses an input is not a failure; only a decoder that crashes,
// throws, or accepts something that breaks its contract is.

#include <string>

namespace keel::fuzz {

[[noreturn]] void invariant_broken(const char* target, const std::string& what);

inline void require(bool holds, const char* target, const std::string& what) {
  if (!holds)
    invariant_broken(target, what);
}

}  // namespace keel::fuzz
