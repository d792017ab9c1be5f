#include <cerrno>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "messages/errors.hpp"
#include "storage/file_io.hpp"
#include "storage/regular_file.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

caf::error fail(const char* op, const fs::path& p, int error_number) {
  return make_error(error_number == ENOENT ? errc::not_found : errc::io_error,
                    std::string(op) + " " + p.string() + ": " + errno_text(error_number));
}

caf::error fail_at(const char* op, const fs::path& p, uint64_t offset, int error_number) {
  return make_error(errc::io_error, std::string(op) + " " + p.string() + " at " +
                                      std::to_string(offset) + ": " + errno_text(error_number));
}

// Owns a file descriptor; closes it once.
class fd_holder {
 public:
  explicit fd_holder(int fd) : fd_(fd) {}
  fd_holder(const fd_holder&) = delete;
  fd_holder& operator=(const fd_holder&) = delete;
  ~fd_holder() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

class posix_writable final : public writable_file {
 public:
  posix_writable(int fd, fs::path p) : fd_(fd), path_(std::move(p)) {}

  caf::error write_at(uint64_t offset, const void* data, size_t n) override {
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0) {
      auto done = ::pwrite(fd_.get(), p, n, static_cast<off_t>(offset));
      if (done < 0) {
        if (errno == EINTR)
          continue;
        return fail_at("write", path_, offset, errno);
      }
      if (done == 0)
        return fail_at("write", path_, offset, EIO);
      p += done;
      n -= static_cast<size_t>(done);
      offset += static_cast<uint64_t>(done);
    }
    return {};
  }

  caf::error sync() override {
    if (::fsync(fd_.get()) != 0)
      return fail("fsync", path_, errno);
    return {};
  }

  const fs::path& path() const override { return path_; }

 private:
  fd_holder fd_;
  fs::path path_;
};

class posix_readable final : public readable_file {
 public:
  posix_readable(int fd, fs::path p) : fd_(fd), path_(std::move(p)) {}

  caf::expected<uint64_t> size() override {
    struct stat st;
    if (::fstat(fd_.get(), &st) != 0)
      return fail("stat", path_, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  caf::error read_at(uint64_t offset, void* out, size_t n) override {
    auto* p = static_cast<unsigned char*>(out);
    while (n > 0) {
      auto done = ::pread(fd_.get(), p, n, static_cast<off_t>(offset));
      if (done < 0) {
        if (errno == EINTR)
          continue;
        return fail_at("read", path_, offset, errno);
      }
      if (done == 0)
        return make_error(errc::io_error, "read " + path_.string() + " at " +
                                            std::to_string(offset) + ": unexpected end of file");
      p += done;
      n -= static_cast<size_t>(done);
      offset += static_cast<uint64_t>(done);
    }
    return {};
  }

  const fs::path& path() const override { return path_; }

 private:
  fd_holder fd_;
  fs::path path_;
};

class posix_file_io final : public file_io {
 public:
  caf::expected<std::unique_ptr<writable_file>> create(const fs::path& p) override {
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
      return fail("create", p, errno);
    return std::unique_ptr<writable_file>(new posix_writable(fd, p));
  }

  caf::expected<std::unique_ptr<readable_file>> open(const fs::path& p) override {
    auto fd = open_regular(p, O_RDONLY, symlinks::refuse);
    if (!fd)
      return std::move(fd.error());
    return std::unique_ptr<readable_file>(new posix_readable(fd->release(), p));
  }

  caf::error rename(const fs::path& from, const fs::path& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0)
      return fail("rename", from, errno);
    return {};
  }

  caf::error remove(const fs::path& p) override {
    if (::unlink(p.c_str()) != 0)
      return fail("remove", p, errno);
    return {};
  }

  caf::error sync_dir(const fs::path& dir) override {
    fd_holder fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0)
      return fail("open directory", dir, errno);
    if (::fsync(fd.get()) != 0)
      return fail("fsync directory", dir, errno);
    return {};
  }

  caf::error create_dirs(const fs::path& dir) override {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      return fail("create directory", dir, ec.value());
    if (!fs::is_directory(dir, ec))
      return make_error(errc::io_error, "create directory " + dir.string() + ": not a directory");
    return {};
  }

  caf::expected<std::vector<std::string>> list(const fs::path& dir) override {
    std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
    if (!d)
      return fail("list", dir, errno);
    std::vector<std::string> names;
    errno = 0;
    while (auto* e = ::readdir(d.get())) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        names.push_back(std::move(name));
    }
    if (errno != 0)
      return fail("list", dir, errno);
    return names;
  }
};

const char* errno_name(int e) {
  switch (e) {
    case ENOSPC: return "ENOSPC";
    case EIO: return "EIO";
    case ENOENT: return "ENOENT";
    case EEXIST: return "EEXIST";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    case EDQUOT: return "EDQUOT";
    case ENOTDIR: return "ENOTDIR";
    case EINVAL: return "EINVAL";
    default: return nullptr;
  }
}

}  // namespace

std::string errno_text(int error_number) {
  std::string out = std::strerror(error_number);
  if (const char* name = errno_name(error_number))
    out += std::string(" (") + name + ")";
  else
    out += " (errno " + std::to_string(error_number) + ")";
  return out;
}

const std::shared_ptr<file_io>& posix_io() {
  static const std::shared_ptr<file_io> io = std::make_shared<posix_file_io>();
  return io;
}

}  // namespace keel
