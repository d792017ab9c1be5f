#pragma once
// crashing_io is a file_io that forwards to another one and, once armed,
// ends the process in the middle of the next write: it stores the first
// half of that write's bytes, calls the `crash` it was given (keel node
// prints which file it dies in, then raises SIGKILL), and stores nothing
// more. A process lost mid-write at a chosen moment, where a kill from
// outside lands wherever it lands: what recovery must survive, made
// deterministic for tests (keel node arms it on SIGUSR1; fault kind
// `crash`). Unarmed it only forwards. arm() is lock-free and may be called
// from any thread.

#include <atomic>
#include <functional>
#include <memory>

#include "storage/file_io.hpp"

namespace keel {

class crashing_io final : public file_io, public std::enable_shared_from_this<crashing_io> {
 public:
  // `crash(file, stored_bytes, write_bytes)` must not return (it ends the
  // process); if it does, the write fails with errc::io_error.
  using crash_fn = std::function<void(const std::filesystem::path& file, uint64_t stored, uint64_t size)>;

  static std::shared_ptr<crashing_io> wrap(std::shared_ptr<file_io> inner, crash_fn crash);

  // The next write, from any thread, is the last.
  void arm() { armed_.store(true); }
  bool armed() const { return armed_.load(); }

  caf::expected<std::unique_ptr<writable_file>> create(const std::filesystem::path& p) override;
  caf::expected<std::unique_ptr<readable_file>> open(const std::filesystem::path& p) override;
  caf::error rename(const std::filesystem::path& from, const std::filesystem::path& to) override;
  caf::error remove(const std::filesystem::path& p) override;
  caf::error sync_dir(const std::filesystem::path& dir) override;
  caf::error create_dirs(const std::filesystem::path& dir) override;
  caf::expected<std::vector<std::string>> list(const std::filesystem::path& dir) override;

  // For its files: true once, for the write that must crash.
  bool take_armed() { return armed_.exchange(false); }
  void crash(const std::filesystem::path& file, uint64_t stored, uint64_t size) const { crash_(file, stored, size); }

 private:
  crashing_io(std::shared_ptr<file_io> inner, crash_fn crash) : inner_(std::move(inner)), crash_(std::move(crash)) {}

  std::shared_ptr<file_io> inner_;
  crash_fn crash_;
  std::atomic<bool> armed_{false};
};

}  // namespace keel
