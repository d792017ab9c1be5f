#pragma once
// Fuzz inputs for the sealed-file readers come in two forms, chosen by a
// flag: a whole file as stored (header and payload, so the header checks are
// fuzzed), or a payload only, which `seal` wraps in a header with the right
// lengths and CRCs. Random mutations almost never keep a CRC right, so the
// second form is what lets the fuzzer reach the decoders behind the
// checksums. The header layout is storage/sealed_file.hpp's.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace keel::fuzz {

// A sealed file of kind `magic` holding the `n` bytes at `payload`, its
// header valid in every field (the payload itself may be anything).
std::vector<unsigned char> seal(uint64_t magic, const uint8_t* payload, size_t n);

}  // namespace keel::fuzz
