#pragma once
// Opening a file keel reads, without being led astray by what the file is.
// Every file keel reads, in a checkpoint or work directory or named by a
// flag, is opened here: without blocking (O_NONBLOCK, so a FIFO in place of
// a file never hangs the open), then checked with fstat(2): a FIFO, a
// device, a socket or a directory is refused before a byte is read. Inside
// a directory keel keeps (symlinks::refuse) the last component is never a
// symbolic link (O_NOFOLLOW): whoever can write that directory cannot make
// keel read, or write, another file through it. A path a user gives on the
// command line may be a link (symlinks::follow). Whole-file reads are
// bounded. Errors are values naming the path and what it is ("/dev/zero:
// not a regular file (it is a character device)"): errc::not_found for a missing
// file, errc::invalid_argument for a file of the wrong kind or size,
// errc::io_error (with errno) otherwise. Thread-safe.

#include <cstdint>
#include <filesystem>
#include <string>

#include <caf/expected.hpp>

namespace keel {

enum class symlinks { follow, refuse };

// Owns a file descriptor; closes it once. Movable, not copyable.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd();
  int get() const { return fd_; }
  // Gives up ownership: the caller closes the descriptor.
  int release();

 private:
  int fd_ = -1;
};

// Opens `path` with `flags` (O_RDONLY, or O_RDWR|O_CREAT for a lock file;
// O_NONBLOCK, O_CLOEXEC and, with symlinks::refuse, O_NOFOLLOW are added)
// and checks it is a regular file. The descriptor is left non-blocking,
// which changes nothing for a regular file.
caf::expected<unique_fd> open_regular(const std::filesystem::path& path, int flags, symlinks links,
                                      unsigned mode = 0644);

// Why a file with fstat mode `mode` is not a regular file ("a FIFO"), or
// "" when it is one.
std::string not_regular_reason(unsigned mode);

// The whole contents of the regular file at `path`, of at most `max_bytes`
// (a larger file, or one that grows past it while read, is refused).
caf::expected<std::string> read_regular_file(const std::filesystem::path& path, uint64_t max_bytes,
                                             symlinks links);

}  // namespace keel
