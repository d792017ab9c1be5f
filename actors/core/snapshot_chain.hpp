#pragma once
// snapshot_chain decides, for one shard, whether its next periodic
// snapshot is a base (everything) or a delta on the snapshot it took last
// (what changed since: actors/core/shard_delta.hpp), and says which chain
// each written file extends, for the manifest entry that commits it. A
// plain value; the parameter_shard actor owns one.
//
// Policy: a delta only extends a chain whose files are all written or
// being written (the last snapshot taken did not fail), shorter than
// `full_every` files, and whose deltas' bytes with this one's estimate stay
// within `delta_fraction` of its base's bytes; and only when the shard
// kept every change (shard_core::changes_complete). Otherwise a base.
// full_every 1: every snapshot is a base (incremental checkpoints off).
//
// Writes complete in the order the snapshots were taken (one writer per
// shard serves them in order), so when a delta's write completes its
// parent's has completed or failed. A delta whose parent's write failed
// is lost (written() says why, and the next snapshot is a base); a
// snapshot whose write failed and is written again later (the same file
// name) extends its chain as before.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/core/chain_options.hpp"
#include "actors/core/shard_delta.hpp"
#include "storage/checkpoint_files.hpp"

namespace keel {

class snapshot_chain {
 public:
  explicit snapshot_chain(chain_options o = {}) : opts_(o) {}

  const chain_options& options() const { return opts_; }

  // The shard restored from the file `links.back()` (its chain, base
  // first): the next snapshot may be a delta on it.
  void restored(std::vector<chain_link> links);

  // The parent of the next snapshot if it is to be a delta, whose size is
  // about `estimate` bytes; nullopt: a base.
  std::optional<delta_parent> next(uint64_t estimate, bool changes_complete) const;

  // Snapshot `id` was taken as file `file` of `bytes` (about the file's
  // size), a delta on `parent` or (nullopt) a base.
  void taken(uint64_t id, const std::string& file, uint64_t bytes, const std::optional<delta_parent>& parent);

  // The write of `id` completed as `written`: the files it applies on
  // (base first; empty for a base), for its manifest entry. An error
  // (errc::damaged_snapshot) when it is a delta whose parent was not
  // written: it can never be restored.
  caf::expected<std::vector<chain_link>> written(uint64_t id, const manifest_entry& written);

  // The write of `id` failed (it may be written again later).
  void failed(uint64_t id);

  // Links in the chain of the last snapshot taken (0: none yet).
  size_t length() const { return tip_length_; }

 private:
  chain_options opts_;
  // Snapshots whose writes have not completed: each one's parent checkpoint
  // (nullopt: a base).
  std::map<uint64_t, std::optional<uint64_t>> taken_;
  std::vector<chain_link> written_;       // the chain of the newest written file, it included
  uint64_t tip_ = 0;                      // the last snapshot taken (0: none)
  std::string tip_file_;
  bool tip_failed_ = false;
  size_t tip_length_ = 0;
  uint64_t base_ = 0, base_bytes_ = 0, delta_bytes_ = 0;  // of the tip's chain
};

}  // namespace keel
