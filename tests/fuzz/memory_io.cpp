#include "memory_io.hpp"

#include <cstring>

#include "messages/errors.hpp"

namespace keel::fuzz {

namespace fs = std::filesystem;

namespace {

caf::error missing(const fs::path& p) {
  return make_error(errc::not_found, "open " + p.string() + ": no such file in memory");
}

class memory_writable final : public writable_file {
 public:
  memory_writable(fs::path p, std::shared_ptr<memory_io::bytes> contents)
    : path_(std::move(p)), contents_(std::move(contents)) {}

  caf::error write_at(uint64_t offset, const void* data, size_t n) override {
    if (contents_->size() < offset + n)
      contents_->resize(offset + n);
    if (n > 0)
      std::memcpy(contents_->data() + offset, data, n);
    return {};
  }
  caf::error sync() override { return {}; }
  const fs::path& path() const override { return path_; }

 private:
  fs::path path_;
  std::shared_ptr<memory_io::bytes> contents_;
};

class memory_readable final : public readable_file {
 public:
  memory_readable(fs::path p, std::shared_ptr<const memory_io::bytes> contents)
    : path_(std::move(p)), contents_(std::move(contents)) {}

  caf::expected<uint64_t> size() override { return uint64_t{contents_->size()}; }
  caf::error read_at(uint64_t offset, void* out, size_t n) override {
    if (offset > contents_->size() || n > contents_->size() - offset)
      return make_error(errc::io_error, "read " + path_.string() + " at " + std::to_string(offset) +
                                          ": " + std::to_string(n) + " bytes past the end");
    if (n > 0)
      std::memcpy(out, contents_->data() + offset, n);
    return {};
  }
  const fs::path& path() const override { return path_; }

 private:
  fs::path path_;
  std::shared_ptr<const memory_io::bytes> contents_;
};

}  // namespace

void memory_io::put(const fs::path& p, bytes contents) {
  files_[p.string()] = std::make_shared<bytes>(std::move(contents));
}

const memory_io::bytes* memory_io::get(const fs::path& p) const {
  auto i = files_.find(p.string());
  return i == files_.end() ? nullptr : i->second.get();
}

caf::expected<std::unique_ptr<writable_file>> memory_io::create(const fs::path& p) {
  auto& slot = files_[p.string()];
  if (slot)
    return make_error(errc::io_error, "create " + p.string() + ": File exists (EEXIST)");
  slot = std::make_shared<bytes>();
  return std::unique_ptr<writable_file>(std::make_unique<memory_writable>(p, slot));
}

caf::expected<std::unique_ptr<readable_file>> memory_io::open(const fs::path& p) {
  auto i = files_.find(p.string());
  if (i == files_.end())
    return missing(p);
  return std::unique_ptr<readable_file>(std::make_unique<memory_readable>(p, i->second));
}

caf::error memory_io::rename(const fs::path& from, const fs::path& to) {
  auto i = files_.find(from.string());
  if (i == files_.end())
    return missing(from);
  auto contents = i->second;
  files_.erase(i);
  files_[to.string()] = std::move(contents);
  return {};
}

caf::error memory_io::remove(const fs::path& p) {
  if (files_.erase(p.string()) == 0)
    return missing(p);
  return {};
}

caf::error memory_io::sync_dir(const fs::path&) {
  return {};
}

caf::error memory_io::create_dirs(const fs::path&) {
  return {};
}

caf::expected<std::vector<std::string>> memory_io::list(const fs::path& dir) {
  std::vector<std::string> names;
  for (auto& [path, contents] : files_)
    if (fs::path(path).parent_path() == dir)
      names.push_back(fs::path(path).filename().string());
  return names;
}

}  // namespace keel::fuzz
