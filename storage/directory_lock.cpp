#include "storage/directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "messages/errors.hpp"
#include "storage/error_context.hpp"
#include "storage/regular_file.hpp"

namespace keel {

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0)
    return "an unknown host";
  return buf;
}

// What the holder wrote into the file ("pid 123 on host h since ..."), or a
// phrase saying it could not be read (a holder between open and write).
std::string holder_of(int fd) {
  char buf[512] = {};
  auto n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0)
    return "a process that has not written its name yet";
  std::string text(buf, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0'))
    text.pop_back();
  return text;
}

caf::error errno_error(const std::filesystem::path& p, const char* what, int err) {
  return make_error(errc::io_error, p.string() + ": " + what + ": " + std::strerror(err));
}

}  // namespace

caf::expected<directory_lock> directory_lock::acquire(const std::filesystem::path& dir) {
  auto path = dir / directory_lock_name;
  // Never through a link, and only a file of its own: the holder's name is
  // written into it, and whoever can write `dir` must not choose what that
  // overwrites (a symlink or a hard link to another file).
  auto opened = open_regular(path, O_RDWR | O_CREAT, symlinks::refuse);
  if (!opened)
    return in_context(opened.error(), "cannot open the lock file: ");
  struct stat st {};
  if (::fstat(opened->get(), &st) != 0)
    return errno_error(path, "cannot stat the lock file", errno);
  if (st.st_nlink != 1)
    return make_error(errc::invalid_argument,
                      path.string() + ": the lock file has " + std::to_string(st.st_nlink) +
                        " names (a hard link to another file?); keel writes only a lock file of its own: remove it");
  directory_lock lock(opened->release());
  int fd = lock.fd_;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    if (err == EWOULDBLOCK)
      return make_error(errc::invalid_argument,
                        "checkpoint directory " + dir.string() + " is in use by " + holder_of(fd) +
                          " (it holds " + path.string() +
                          "): one run writes a directory at a time; wait for it to end, or stop it");
    return errno_error(path, "cannot lock (a filesystem without locks? see README, shared filesystems)", err);
  }
  auto since = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  auto text = "pid " + std::to_string(::getpid()) + " on host " + host_name() + " (since unix time " +
              std::to_string(since) + ")\n";
  // Best effort: the lock is what excludes; the text only names the holder.
  if (::ftruncate(fd, 0) == 0)
    (void)!::pwrite(fd, text.data(), text.size(), 0);
  return lock;
}

directory_lock::directory_lock(directory_lock&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

directory_lock& directory_lock::operator=(directory_lock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

directory_lock::~directory_lock() {
  release();
}

void directory_lock::release() {
  if (fd_ >= 0)
    ::close(fd_);  // closing the last descriptor of the open file releases the flock
  fd_ = -1;
}

}  // namespace keel
