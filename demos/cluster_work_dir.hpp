#pragma once
// The temporary directory `keel cluster` keeps its started nodes' cluster
// secret in (/tmp/keel-cluster-XXXXXX, mode 0700, the secret 0600). The
// coordinator holds a directory_lock on it (storage/directory_lock.hpp) for
// its life and removes it when it ends. A coordinator killed with kill -9
// cannot remove it; the kernel drops its lock, though, and the next `keel
// cluster` of the same user sweeps every such directory whose lock names a
// holder that no longer holds it, before it makes its own. A directory
// whose lock file is empty (its maker died between creating and naming it)
// or that has none (made by a keel before this one) is left alone.

#include <filesystem>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "storage/directory_lock.hpp"

namespace keel::cli {

class cluster_work_dir {
 public:
  // Makes a fresh directory under `parent` and locks it.
  static caf::expected<cluster_work_dir> make(const std::filesystem::path& parent = "/tmp");
  cluster_work_dir(cluster_work_dir&&) = default;
  ~cluster_work_dir();

  const std::filesystem::path& path() const { return path_; }

  // Writes a fresh random secret (64 hex digits) into `cluster.secret`,
  // created with mode 0600 (never readable by others, not even for a
  // moment) and refusing to follow or reuse an existing file.
  caf::expected<std::filesystem::path> write_secret() const;

 private:
  cluster_work_dir(std::filesystem::path p, directory_lock l) : path_(std::move(p)), lock_(std::move(l)) {}
  std::filesystem::path path_;
  directory_lock lock_;
};

// Removes the keel-cluster-* directories under `parent` owned by this user
// whose coordinator died (see above); returns the ones removed.
std::vector<std::filesystem::path> sweep_stale_work_dirs(const std::filesystem::path& parent = "/tmp");

}  // namespace keel::cli
