#include "storage/regular_file.hpp"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "messages/errors.hpp"
#include "storage/file_io.hpp"

namespace keel {

namespace fs = std::filesystem;

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

unique_fd::~unique_fd() {
  if (fd_ >= 0)
    ::close(fd_);
}

int unique_fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

std::string not_regular_reason(unsigned mode) {
  if (S_ISREG(mode))
    return {};
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISLNK(mode))
    return "a symbolic link";
  return "not a file";
}

caf::expected<unique_fd> open_regular(const fs::path& path, int flags, symlinks links, unsigned mode) {
  flags |= O_NONBLOCK | O_CLOEXEC;
  if (links == symlinks::refuse)
    flags |= O_NOFOLLOW;
  unique_fd fd(::open(path.c_str(), flags, static_cast<mode_t>(mode)));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ENOENT)
      return make_error(errc::not_found, "open " + path.string() + ": " + errno_text(err));
    // O_NOFOLLOW fails with ELOOP on a link (and opening a directory for
    // writing with EISDIR): say what the file is, not the errno.
    struct stat st {};
    if ((err == ELOOP || err == EISDIR) && ::lstat(path.c_str(), &st) == 0)
      return make_error(errc::invalid_argument,
                        path.string() + ": not a regular file (it is " + not_regular_reason(st.st_mode) +
                          (S_ISLNK(st.st_mode) ? ", which keel does not follow inside a directory it keeps)" : ")"));
    return make_error(errc::io_error, "open " + path.string() + ": " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return make_error(errc::io_error, "stat " + path.string() + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode))
    return make_error(errc::invalid_argument,
                      path.string() + ": not a regular file (it is " + not_regular_reason(st.st_mode) + ")");
  return fd;
}

caf::expected<std::string> read_regular_file(const fs::path& path, uint64_t max_bytes, symlinks links) {
  auto fd = open_regular(path, O_RDONLY, links);
  if (!fd)
    return std::move(fd.error());
  auto too_large = [&] {
    return make_error(errc::invalid_argument,
                      path.string() + ": larger than " + std::to_string(max_bytes) + " bytes");
  };
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0)
    return make_error(errc::io_error, "stat " + path.string() + ": " + errno_text(errno));
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return too_large();
  // One byte more than allowed, to notice a file that grew since the fstat.
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t done = 0;
  for (;;) {
    if (done == text.size()) {
      if (text.size() > max_bytes)
        return too_large();
      text.resize(std::min<uint64_t>(max_bytes + 1, text.size() * 2));
    }
    auto n = ::read(fd->get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return make_error(errc::io_error, "read " + path.string() + ": " + errno_text(errno));
    if (n == 0)
      break;
    done += static_cast<size_t>(n);
  }
  if (done > max_bytes)
    return too_large();
  text.resize(done);
  return text;
}

}  // namespace keel
