#pragma once
// A directory_lock makes one process the only writer of a checkpoint
// directory: an exclusive flock(2) on `DIR/keel.lock`, held while the value
// lives and released by the kernel when the process dies however it dies
// (kill -9 included), so a stale lock never outlives its holder. The file
// names the holder (pid, host, since when) for the error a second writer
// gets; the file itself stays behind and means nothing without the lock.
// Whoever can write the directory cannot aim that text at another file:
// the lock file is opened without following a link, and refused unless it
// is a regular file with no other name (no FIFO, device or hard link).
// The descriptor is close-on-exec: a child the holder starts (keel
// cluster's nodes) never inherits the lock. On a shared filesystem the lock
// is only as good as the filesystem's locking (README: NFS). Movable, not
// copyable; not thread-safe (one owner).

#include <filesystem>
#include <string>

#include <caf/expected.hpp>

namespace keel {

// The lock file's name inside the directory (the store never touches it).
constexpr const char* directory_lock_name = "keel.lock";

class directory_lock {
 public:
  // Takes the lock on `dir` (which must exist) without waiting. Fails with
  // errc::invalid_argument naming the directory and the holder's pid and
  // host when another open file holds it (another process, or this one
  // through another lock), errc::io_error when the file cannot be opened or
  // the filesystem refuses locks (naming errno), errc::invalid_argument
  // naming the file when it is a link, not a regular file, or has more
  // than one name.
  static caf::expected<directory_lock> acquire(const std::filesystem::path& dir);

  directory_lock() = default;
  directory_lock(directory_lock&& other) noexcept;
  directory_lock& operator=(directory_lock&& other) noexcept;
  directory_lock(const directory_lock&) = delete;
  directory_lock& operator=(const directory_lock&) = delete;
  ~directory_lock();

  bool held() const { return fd_ >= 0; }
  // Releases the lock now (the destructor does otherwise).
  void release();

 private:
  explicit directory_lock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace keel
