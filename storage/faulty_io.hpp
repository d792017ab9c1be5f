#pragma once
// faulty_io is a file_io that forwards to another one (normally posix_io())
// and injects the failures a real disk produces, on a schedule set by the
// caller: fail the Nth write, fsync, rename, create or read with an errno
// (ENOSPC, EIO, ...), tear the Nth write after some bytes, or end the
// process in the middle of the Nth write (keel node's crash fault). Tests use it
// to prove a failed checkpoint leaves the previous one valid; the fault
// injector of actors/ arms it at run time. Thread-safe: operations from any
// thread are counted in one sequence per kind, and arming is atomic with
// respect to them. For damaging files already stored, see file_damage.hpp.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "storage/file_io.hpp"

namespace keel {

enum class io_op : uint8_t {
  create,    // file_io::create
  write,     // writable_file::write_at (one call, whatever its size)
  fsync,     // writable_file::sync and file_io::sync_dir
  rename,    // file_io::rename
  read,      // readable_file::read_at
};

const char* to_string(io_op op);

// One scheduled failure: the `nth` operation of kind `op` counted from when
// it is armed (1 = the next one), and the `count` - 1 after it, fail with
// `error_number`, doing nothing. With `lasting` non-zero, every operation of
// kind `op` fails instead, from the `nth` until `lasting` after arming (a
// disk that stays full for a while).
struct io_fault {
  io_op op = io_op::write;
  uint64_t nth = 1;
  int error_number = 5;  // EIO
  uint64_t count = 1;
  std::chrono::milliseconds lasting{0};
};

// A torn write: the `nth` write (counted from arming) stores only its first
// `keep_bytes` bytes. If `report_success` the call claims success anyway (a
// device that lies, or a crash after the call returned); else it fails with
// EIO after storing the prefix (a crash inside the call).
struct io_tear {
  uint64_t nth = 1;
  uint64_t keep_bytes = 0;
  bool report_success = true;
};

// A process that dies in the middle of a write: the `nth` write (counted
// from arming) stores the first half of its bytes, then `crash(file,
// stored, size)` runs, which is meant to end the process (keel node prints
// the file and raises SIGKILL). If it returns, the write fails with EIO.
struct io_crash {
  uint64_t nth = 1;
  std::function<void(const std::filesystem::path& file, uint64_t stored, uint64_t size)> crash;
};

// How many operations of each kind the wrapped io has seen since creation.
struct io_counts {
  uint64_t create = 0, write = 0, fsync = 0, rename = 0, read = 0;
  uint64_t of(io_op op) const;
};

class faulty_io final : public file_io, public std::enable_shared_from_this<faulty_io> {
 public:
  // Wraps `inner`, initially injecting nothing.
  static std::shared_ptr<faulty_io> wrap(std::shared_ptr<file_io> inner = posix_io());

  // Schedules a failure or a tear; several may be pending at once.
  void arm(io_fault f);
  void arm(io_tear t);
  void arm(io_crash c);
  // Drops every pending failure, tear and crash.
  void disarm();
  // Number of armed failures and tears that have not fired yet.
  size_t pending() const;
  io_counts counts() const;

  caf::expected<std::unique_ptr<writable_file>> create(const std::filesystem::path& p) override;
  caf::expected<std::unique_ptr<readable_file>> open(const std::filesystem::path& p) override;
  caf::error rename(const std::filesystem::path& from, const std::filesystem::path& to) override;
  caf::error remove(const std::filesystem::path& p) override;
  caf::error sync_dir(const std::filesystem::path& dir) override;
  caf::error create_dirs(const std::filesystem::path& dir) override;
  caf::expected<std::vector<std::string>> list(const std::filesystem::path& dir) override;

  // What the next operation of kind `op` must do; used by the file wrappers.
  struct decision {
    int error_number = 0;          // non-zero: fail with this errno
    bool tear = false;             // write: store only `keep_bytes`
    uint64_t keep_bytes = 0;
    bool report_success = true;
    // write: a tear that keeps half of the write (not keep_bytes), then this
    std::function<void(const std::filesystem::path&, uint64_t, uint64_t)> crash;
  };
  decision next(io_op op);

 private:
  explicit faulty_io(std::shared_ptr<file_io> inner) : inner_(std::move(inner)) {}

  struct armed_fault {
    io_fault fault;
    uint64_t at;  // absolute count at which it fires first
    std::chrono::steady_clock::time_point until;  // fault.lasting: when it stops
  };
  struct armed_tear {
    io_tear tear;
    uint64_t at;
  };
  struct armed_crash {
    io_crash crash;
    uint64_t at;
  };

  std::shared_ptr<file_io> inner_;
  mutable std::mutex mtx_;
  io_counts counts_;
  std::vector<armed_fault> faults_;
  std::vector<armed_tear> tears_;
  std::vector<armed_crash> crashes_;
};

}  // namespace keel
