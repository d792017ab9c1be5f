#pragma once
// CRC32C (Castagnoli), the checksum of every stored tensor, section and file.
// `crc32c_extend` continues a running checksum, so a file can be checked in
// pieces as it is read or written; extending by pieces equals one pass over
// the concatenation. Boost.CRC is the reference implementation; on x86-64
// CPUs with SSE4.2 the same function runs on the CPU's crc32 instruction
// (about 20x faster here, see the note in crc32c.cpp). Thread-safe, pure.

#include <cstddef>
#include <cstdint>

namespace keel {

// The CRC32C of the empty string; the `crc` to start a running checksum from.
constexpr uint32_t crc32c_empty = 0;

// Returns the CRC32C of (the bytes `crc` was computed over) followed by the
// `n` bytes at `data`.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);

// The CRC32C of the `n` bytes at `data`.
inline uint32_t crc32c(const void* data, size_t n) {
  return crc32c_extend(crc32c_empty, data, n);
}

// The CRC32C of A followed by B, from crc_a = crc32c(A), crc_b = crc32c(B)
// and B's length: how checksums of pieces computed apart (or out of order)
// make the checksum of the whole. O(log len_b), no pass over the bytes.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// The same checksum computed with Boost.CRC only (the portable reference;
// tests check the fast path against it).
uint32_t crc32c_extend_reference(uint32_t crc, const void* data, size_t n);

// True if crc32c_extend uses the CPU's crc32 instruction on this machine.
bool crc32c_is_hardware_accelerated();

}  // namespace keel
