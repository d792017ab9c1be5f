#pragma once
// Whether float32 values are all finite, scanned as fast as memory reads
// them (no CAF, no Cap'n Proto: the table codec checks restored rows with it).

#include <cstddef>

namespace keel {

// True if every one of the `n` little-endian float32 values at `p` is finite.
bool all_finite(const void* p, size_t n);

// Copies `n` float32 values from `src` to `dst` (not overlapping) and says
// whether all are finite, in one pass over the bytes.
bool copy_all_finite(void* dst, const void* src, size_t n);

}  // namespace keel
