#include "cluster_work_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "messages/errors.hpp"

namespace keel::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* prefix = "keel-cluster-";

// True when `dir`'s lock file names a holder (it was locked once) that no
// longer holds it. Takes the lock to find out; it goes with the directory.
bool abandoned(const fs::path& dir) {
  std::error_code ec;
  auto lock_file = dir / directory_lock_name;
  if (!fs::is_regular_file(fs::symlink_status(lock_file, ec)) || fs::file_size(lock_file, ec) == 0 || ec)
    return false;
  auto lock = directory_lock::acquire(dir);
  return static_cast<bool>(lock);
}

}  // namespace

caf::expected<cluster_work_dir> cluster_work_dir::make(const fs::path& parent) {
  auto tmpl = (parent / (std::string(prefix) + "XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return make_error(errc::io_error, "cannot create a temporary directory " + tmpl + ": " + std::strerror(errno));
  auto lock = directory_lock::acquire(tmpl);
  if (!lock) {
    std::error_code ec;
    fs::remove_all(tmpl, ec);
    return std::move(lock.error());
  }
  return cluster_work_dir(tmpl, std::move(*lock));
}

cluster_work_dir::~cluster_work_dir() {
  if (path_.empty() || !lock_.held())
    return;  // moved from
  std::error_code ec;
  fs::remove_all(path_, ec);
}

caf::expected<fs::path> cluster_work_dir::write_secret() const {
  std::random_device rd;
  std::string secret;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 64; ++i) secret += hex[rd() % 16];
  secret += "\n";
  auto path = path_ / "cluster.secret";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return make_error(errc::io_error, "cannot create " + path.string() + ": " + std::strerror(errno));
  bool ok = ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok)
    return make_error(errc::io_error, "cannot write " + path.string());
  return path;
}

std::vector<fs::path> sweep_stale_work_dirs(const fs::path& parent) {
  std::vector<fs::path> removed;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(parent, ec)) {
    auto name = entry.path().filename().string();
    struct stat st {};
    if (name.rfind(prefix, 0) != 0 || ::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != ::getuid())
      continue;
    if (!abandoned(entry.path()))
      continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
    if (!rm)
      removed.push_back(entry.path());
  }
  return removed;
}

}  // namespace keel::cli
