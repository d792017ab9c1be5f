#include "storage/file_damage.hpp"

#include <algorithm>
#include <cerrno>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "messages/errors.hpp"
#include "storage/error_context.hpp"
#include "storage/file_io.hpp"
#include "storage/regular_file.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

caf::error fail(const char* what, const fs::path& p, int e) {
  return make_error(e == ENOENT ? errc::not_found : errc::io_error,
                    std::string(what) + " " + p.string() + ": " + errno_text(e));
}

// Opens `p` read-write and reports its size; closes on destruction.
struct open_file {
  int fd = -1;
  uint64_t size = 0;
  ~open_file() {
    if (fd >= 0)
      ::close(fd);
  }
};

caf::error open_rw(const fs::path& p, open_file& f) {
  // Never through a link: the damage goes to the store's own file.
  auto fd = open_regular(p, O_RDWR, symlinks::refuse);
  if (!fd)
    return in_context(fd.error(), "damage: ");
  f.fd = fd->release();
  struct stat st;
  if (::fstat(f.fd, &st) != 0)
    return fail("damage: stat", p, errno);
  f.size = static_cast<uint64_t>(st.st_size);
  return {};
}

caf::error past_end(const fs::path& p, uint64_t offset, uint64_t size) {
  return make_error(errc::invalid_argument, "damage: offset " + std::to_string(offset) +
                                              " is past the end of " + p.string() + " (" +
                                              std::to_string(size) + " bytes)");
}

}  // namespace

caf::error flip_bit(const fs::path& p, uint64_t byte_offset, unsigned bit) {
  open_file f;
  if (auto err = open_rw(p, f))
    return err;
  if (byte_offset >= f.size)
    return past_end(p, byte_offset, f.size);
  unsigned char b = 0;
  if (::pread(f.fd, &b, 1, static_cast<off_t>(byte_offset)) != 1)
    return fail("damage: read", p, errno);
  b = static_cast<unsigned char>(b ^ (1u << (bit & 7u)));
  if (::pwrite(f.fd, &b, 1, static_cast<off_t>(byte_offset)) != 1)
    return fail("damage: write", p, errno);
  return {};
}

caf::error truncate_file(const fs::path& p, uint64_t size_bytes) {
  open_file f;
  if (auto err = open_rw(p, f))
    return err;
  if (size_bytes > f.size)
    return past_end(p, size_bytes, f.size);
  if (::ftruncate(f.fd, static_cast<off_t>(size_bytes)) != 0)
    return fail("damage: truncate", p, errno);
  return {};
}

caf::error zero_range(const fs::path& p, uint64_t offset, uint64_t n) {
  open_file f;
  if (auto err = open_rw(p, f))
    return err;
  if (offset >= f.size)
    return past_end(p, offset, f.size);
  n = std::min(n, f.size - offset);
  std::vector<unsigned char> zeros(static_cast<size_t>(n), 0);
  if (::pwrite(f.fd, zeros.data(), zeros.size(), static_cast<off_t>(offset)) !=
      static_cast<ssize_t>(zeros.size()))
    return fail("damage: write", p, errno);
  return {};
}

caf::error overwrite(const fs::path& p, uint64_t offset, const std::string& bytes) {
  open_file f;
  if (auto err = open_rw(p, f))
    return err;
  if (offset > f.size)
    return past_end(p, offset, f.size);
  if (::pwrite(f.fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) !=
      static_cast<ssize_t>(bytes.size()))
    return fail("damage: write", p, errno);
  return {};
}

}  // namespace keel
