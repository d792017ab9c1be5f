#pragma once
// How a fuzz target reports a broken invariant: it throws an
// invariant_violation naming the target and the property that failed. The
// libFuzzer programs (libfuzzer_main.cpp) print it and abort, so libFuzzer
// saves the input as a crash; the replay test (replay_test.cpp) catches it
// and fails a check that names the input file and the property. A decoder
// that merely refuses an input is not a failure; only a decoder that
// crashes, throws, or accepts something that breaks its contract is.

#include <stdexcept>
#include <string>

namespace keel::fuzz {

// A property that must hold for every input does not hold for this one.
// what() reads "<target>: invariant broken: <property>". Not a
// kj::Exception, so the harnesses' catches of capnp's errors let it pass.
class invariant_violation : public std::logic_error {
 public:
  invariant_violation(const char* target, const std::string& what);
};

// Throws invariant_violation(target, what).
[[noreturn]] void invariant_broken(const char* target, const std::string& what);

inline void require(bool holds, const char* target, const std::string& what) {
  if (!holds)
    invariant_broken(target, what);
}

}  // namespace keel::fuzz
