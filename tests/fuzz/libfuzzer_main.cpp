// The libFuzzer program of one fuzz target: built once per target with
// KEEL_FUZZ_ENTRY naming its entry point (tests/fuzz/CMakeLists.txt).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz_targets.hpp"
#include "invariant.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    return keel::fuzz::KEEL_FUZZ_ENTRY(data, size);
  } catch (const keel::fuzz::invariant_violation& e) {
    // libFuzzer saves the input of a run that aborts as a crash; the message
    // says which property broke. (Any other exception escaping a decoder
    // ends in std::terminate, which aborts too.)
    std::fprintf(stderr, "%s\n", e.what());
    std::fflush(stderr);
    std::abort();
  }
}
