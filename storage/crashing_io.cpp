#include "storage/crashing_io.hpp"

#include "messages/errors.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

class crashing_writable final : public writable_file {
 public:
  crashing_writable(std::unique_ptr<writable_file> inner, std::shared_ptr<crashing_io> io)
    : inner_(std::move(inner)), io_(std::move(io)) {}

  caf::error write_at(uint64_t offset, const void* data, size_t n) override {
    if (!io_->take_armed())
      return inner_->write_at(offset, data, n);
    auto half = n / 2;
    if (auto err = inner_->write_at(offset, data, half))
      return err;
    io_->crash(path(), half, n);
    return make_error(errc::io_error, "write " + path().string() + " at " + std::to_string(offset) +
                                        ": the process was to end here, after " + std::to_string(half) + " of " +
                                        std::to_string(n) + " bytes [injected]");
  }

  caf::error sync() override { return inner_->sync(); }
  const fs::path& path() const override { return inner_->path(); }

 private:
  std::unique_ptr<writable_file> inner_;
  std::shared_ptr<crashing_io> io_;
};

}  // namespace

std::shared_ptr<crashing_io> crashing_io::wrap(std::shared_ptr<file_io> inner, crash_fn crash) {
  return std::shared_ptr<crashing_io>(new crashing_io(std::move(inner), std::move(crash)));
}

caf::expected<std::unique_ptr<writable_file>> crashing_io::create(const fs::path& p) {
  auto f = inner_->create(p);
  if (!f)
    return f.error();
  return std::unique_ptr<writable_file>(new crashing_writable(std::move(*f), shared_from_this()));
}

caf::expected<std::unique_ptr<readable_file>> crashing_io::open(const fs::path& p) { return inner_->open(p); }
caf::error crashing_io::rename(const fs::path& from, const fs::path& to) { return inner_->rename(from, to); }
caf::error crashing_io::remove(const fs::path& p) { return inner_->remove(p); }
caf::error crashing_io::sync_dir(const fs::path& dir) { return inner_->sync_dir(dir); }
caf::error crashing_io::create_dirs(const fs::path& dir) { return inner_->create_dirs(dir); }
caf::expected<std::vector<std::string>> crashing_io::list(const fs::path& dir) { return inner_->list(dir); }

}  // namespace keel
