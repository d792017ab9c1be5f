#pragma once
// memory_io is a file_io whose files live in memory, so a fuzz input can be
// read by the storage layer's real readers (read_sealed and those built on
// it) without touching the disk, and written back through its real writers.
// Paths are plain keys: directories exist implicitly and sync is a no-op.
// Not thread-safe; a fuzz iteration owns one.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "storage/file_io.hpp"

namespace keel::fuzz {

class memory_io final : public file_io {
 public:
  using bytes = std::vector<unsigned char>;

  // Makes `p` hold `contents`, replacing any file there.
  void put(const std::filesystem::path& p, bytes contents);
  // The contents of `p`, or null if there is no such file.
  const bytes* get(const std::filesystem::path& p) const;

  caf::expected<std::unique_ptr<writable_file>> create(const std::filesystem::path& p) override;
  caf::expected<std::unique_ptr<readable_file>> open(const std::filesystem::path& p) override;
  caf::error rename(const std::filesystem::path& from, const std::filesystem::path& to) override;
  caf::error remove(const std::filesystem::path& p) override;
  caf::error sync_dir(const std::filesystem::path& dir) override;
  caf::error create_dirs(const std::filesystem::path& dir) override;
  caf::expected<std::vector<std::string>> list(const std::filesystem::path& dir) override;

 private:
  std::map<std::string, std::shared_ptr<bytes>> files_;
};

}  // namespace keel::fuzz
