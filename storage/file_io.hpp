#pragma once
// file_io is the storage layer's only door to the file system: every byte a
// snapshot_store writes or reads goes through one, so tests and the fault
// injector can substitute `faulty_io` (storage/faulty_io.hpp) for the real
// `posix_io()`. Every operation returns an error value instead of throwing;
// an I/O failure is errc::io_error whose text names the operation, the path
// and the errno ("write ckpt-3.snap.tmp at 4096: No space left on device
// (ENOSPC)"). Implementations are thread-safe; a file object is used by one
// thread at a time.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace keel {

// A file being written. Closing is implicit on destruction; only `sync`
// makes written bytes durable.
class writable_file {
 public:
  virtual ~writable_file() = default;
  // Writes all `n` bytes at byte `offset` (retrying short writes).
  virtual caf::error write_at(uint64_t offset, const void* data, size_t n) = 0;
  // fsync: the bytes written so far survive a crash once this succeeds.
  virtual caf::error sync() = 0;
  virtual const std::filesystem::path& path() const = 0;
};

// A file opened for reading.
class readable_file {
 public:
  virtual ~readable_file() = default;
  virtual caf::expected<uint64_t> size() = 0;
  // Reads exactly `n` bytes at `offset`; reading past the end is an error.
  virtual caf::error read_at(uint64_t offset, void* out, size_t n) = 0;
  virtual const std::filesystem::path& path() const = 0;
};

class file_io {
 public:
  virtual ~file_io() = default;
  // Creates a new file for writing; fails if it exists.
  virtual caf::expected<std::unique_ptr<writable_file>> create(const std::filesystem::path& p) = 0;
  virtual caf::expected<std::unique_ptr<readable_file>> open(const std::filesystem::path& p) = 0;
  // rename(2): atomically replaces `to` if it exists.
  virtual caf::error rename(const std::filesystem::path& from, const std::filesystem::path& to) = 0;
  // Removes a file; a file that does not exist is errc::not_found.
  virtual caf::error remove(const std::filesystem::path& p) = 0;
  // fsync on a directory: makes creations, renames and removals in it durable.
  virtual caf::error sync_dir(const std::filesystem::path& dir) = 0;
  // Creates `dir` (and its parents) if missing; fails if it is not a directory.
  virtual caf::error create_dirs(const std::filesystem::path& dir) = 0;
  // The names of the entries of `dir` (not "." or ".."), unsorted.
  virtual caf::expected<std::vector<std::string>> list(const std::filesystem::path& dir) = 0;
};

// The real file system through POSIX calls. One shared instance.
const std::shared_ptr<file_io>& posix_io();

// "No space left on device (ENOSPC)": strerror plus the symbolic errno name,
// so test output and logs can be matched on either.
std::string errno_text(int error_number);

}  // namespace keel
