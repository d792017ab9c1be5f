#pragma once
// Damage done to a file already stored, as a failing disk or a crash would
// leave it: a flipped bit, a truncation, a torn region (zeroed, as when a
// page never reached the disk), or overwritten bytes. Used by tests, by
// `keel inspect`'s own tests and by the fault injector to prove that storage
// detects every kind. Each call changes the file in place through POSIX
// calls and returns an error value (errc::io_error or not_found) if it
// cannot; offsets past the end are errc::invalid_argument.

#include <cstdint>
#include <filesystem>
#include <string>

#include <caf/error.hpp>

namespace keel {

// Inverts bit `bit` (0-7) of the byte at `byte_offset`.
caf::error flip_bit(const std::filesystem::path& p, uint64_t byte_offset, unsigned bit = 0);

// Cuts the file to its first `size_bytes` bytes.
caf::error truncate_file(const std::filesystem::path& p, uint64_t size_bytes);

// Sets `n` bytes from `offset` to zero (clamped to the end of the file).
caf::error zero_range(const std::filesystem::path& p, uint64_t offset, uint64_t n);

// Writes `bytes` over the file's contents at `offset` (may extend it).
caf::error overwrite(const std::filesystem::path& p, uint64_t offset, const std::string& bytes);

}  // namespace keel
