#pragma once
// Bytes as lower-case hex, two digits a byte: digests, nonces and ids in
// logs, file names and headers.

#include <cstddef>
#include <cstdint>
#include <string>

namespace keel {

std::string hex_of(const uint8_t* bytes, size_t n);

}  // namespace keel
