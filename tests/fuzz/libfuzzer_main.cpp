// The libFuzzer program of one fuzz target: built once per target with
// KEEL_FUZZ_ENTRY naming its entry point (tests/fuzz/CMakeLists.txt).

#include <cstddef>
#include <cstdint>

#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return keel::fuzz::KEEL_FUZZ_ENTRY(data, size);
}
