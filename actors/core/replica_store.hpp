#pragma once
// A replica_store keeps in memory, per shard of each job, the frames of the
// files of that shard's newest written chain (its base and the deltas on
// it), so a shard restarted on this node can restore without the checkpoint
// directory (Gemini, SOSP'23: checkpoints in a peer's memory). Keeping a
// file drops every file of the same shard that the new file's chain does
// not name, so a shard holds at most one chain here: a new base drops the
// whole chain before it, a delta keeps the files it applies on, and a file
// of another job (a run that followed, or a resume) drops the older job's
// copies of that shard. A file older (by checkpoint) than the same job's
// newest kept one of the shard is refused. A
// file is found by (name, bytes, payload CRC) only: what a manifest records.
// Frames are immutable and shared, so keeping and serving one copies no
// bytes. It checks nothing in what it keeps: whoever restores from a copy
// validates every byte (check_chain_link_copy, storage/checkpoint_files.hpp).
// Thread-safe: a replica actor keeps while a shard's start reads.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "messages/protocol.hpp"
#include "storage/checkpoint_files.hpp"

namespace keel {

class replica_store {
 public:
  // Keeps `frame` as `file` of shard `shard` of job `job` (its run id), the
  // newest file of the chain `chain` (the files it applies on, base first;
  // empty: a base), and drops the shard's files the chain does not name.
  // False (nothing changes) when the job's shard already holds a newer
  // file, or `frame` is empty.
  bool keep(const std::string& job, uint32_t shard, const chain_link& file, const std::vector<chain_link>& chain,
            shard_snapshot_msg frame);

  // The frame kept as (name, bytes, crc32c), if any.
  std::optional<shard_snapshot_msg> find(const std::string& name, uint64_t bytes, uint32_t crc32c) const;

  // The frames' bytes and how many files are held now, and the most bytes
  // held at once so far.
  uint64_t bytes() const;
  size_t files() const;
  uint64_t peak_bytes() const;

 private:
  struct kept {
    std::string job;
    chain_link link;
    shard_snapshot_msg frame;
    uint64_t bytes = 0;
  };
  mutable std::mutex mtx_;
  std::map<uint32_t, std::vector<kept>> shards_;  // by shard
  uint64_t bytes_ = 0;
  uint64_t peak_ = 0;
};

}  // namespace keel
