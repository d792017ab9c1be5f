#pragma once
// A snapshot_store keeps the checkpoints of one training job in a directory.
// A checkpoint is a set of shard snapshot files committed by a manifest
// written last and atomically: a checkpoint without its manifest does not
// exist, and after a crash at any point the store holds the old checkpoints
// or the new one too, never a mix. Reads check length, every CRC32C and the
// schema, and never return a damaged snapshot as good; `latest_valid` falls
// back to older checkpoints and reports which file was damaged and why. A
// shard's entry may be a delta (checkpoint_files.hpp, manifest_entry::chain):
// the checkpoint is then valid only if every file of its chain is, and
// those files live as long as a kept manifest names them, whichever
// checkpoint wrote them. The store keeps the newest `keep_last` checkpoints
// (their manifests, and every snapshot file those name). One writing process at a
// time; within it, every member may be called from any thread (snapshot
// writes of different shards run in parallel, commits are serialised).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "storage/checkpoint_files.hpp"

namespace keel {

struct store_options {
  size_t keep_last = 3;  // K: committed checkpoints kept; at least 1
  std::shared_ptr<file_io> io = posix_io();
  std::shared_ptr<buffer_pool> pool = buffer_pool::process_default();
  // The run whose checkpoints this store commits: every manifest it writes
  // carries it (unless the manifest given to commit has its own).
  run_identity run;
  // Others write snapshot files into the directory (a job's shards write
  // their own, actors/ps/parameter_shard.hpp): open() then leaves the files
  // of checkpoints newer than the newest committed one, which may be writes
  // in progress; the retention of a later commit removes them.
  bool shards_write = false;
};

// A file that failed validation and why (`keel::describe(reason)`).
struct damage_report {
  std::string file;
  caf::error reason;
};

// A committed checkpoint read back whole, every file validated.
struct loaded_checkpoint {
  checkpoint_manifest manifest;
  // In manifest order (by shard): each entry's own file. For a delta entry
  // that is the delta alone; the files of its chain were validated, in
  // order, but are not held (read_chain_link reads them).
  std::vector<stored_snapshot> snapshots;
  // The snapshot of `shard`, or nullptr if the checkpoint has none.
  const stored_snapshot* shard(uint32_t shard) const;
};

// The newest checkpoint that validated, and the newer ones skipped.
struct latest_checkpoint {
  loaded_checkpoint checkpoint;
  std::vector<damage_report> skipped;  // newest first
};

// The newest checkpoint whose files all validated, held by its manifest
// alone, and the newer ones skipped.
struct verified_checkpoint {
  checkpoint_manifest manifest;
  std::vector<damage_report> skipped;  // newest first
};

struct commit_result {
  uint64_t checkpoint = 0;
  std::vector<uint64_t> removed;  // older checkpoints dropped by retention
  // Retention is best effort once the commit is durable: a failure to remove
  // an old checkpoint is reported here (it is retried on the next commit or
  // open), not as a failed commit.
  caf::error retention_problem;
};

class snapshot_store {
 public:
  // Opens (creating if needed) the store at `dir`. Removes what a crashed
  // writer left: temporary files, snapshot files of checkpoints without a
  // manifest that no kept manifest names in a chain, and checkpoints beyond
  // `keep_last` (with shards_write, only up to the newest committed
  // checkpoint). A kept manifest that cannot be read keeps every snapshot
  // file (it might name any) and does not fail the open. Fails if `dir`
  // cannot be created or listed, or `keep_last` is 0.
  static caf::expected<std::unique_ptr<snapshot_store>> open(std::filesystem::path dir,
                                                             store_options opts = {});

  const std::filesystem::path& dir() const { return dir_; }
  const store_options& options() const { return opts_; }

  // Writes one shard's snapshot (its checkpoint and shard fields name the
  // file) durably, not yet committed. Refuses a snapshot whose checkpoint is
  // not newer than the newest committed one (errc::invalid_argument), an
  // invalid snapshot, and reports I/O failures naming the file and errno.
  caf::expected<manifest_entry> write_snapshot(const shard_snapshot_msg& snapshot);

  // Commits checkpoint `m.checkpoint` by writing its manifest, whose entries
  // come from write_snapshot; then applies retention. Refuses
  // (errc::invalid_argument, naming the file and why) an entry whose file,
  // or a file of whose chain, is not a snapshot file of its shard present
  // with its recorded length, and a chain whose checkpoints are not older
  // than the entry's and ascending. On any failure the manifest is absent
  // and the previous checkpoint stays the latest valid.
  caf::expected<commit_result> commit(checkpoint_manifest m);

  // write_snapshot for each, then commit: a whole checkpoint in one call.
  // Every snapshot must carry `checkpoint`.
  caf::expected<commit_result> write_checkpoint(uint64_t checkpoint, uint64_t step,
                                                int64_t created_unix_ms,
                                                const std::vector<shard_snapshot_msg>& snapshots);

  // Removes the files of checkpoint `checkpoint` if it is not committed
  // (after a failed write). Committed checkpoints are left alone, and so is
  // a file a newer manifest names in a chain; if a newer manifest cannot be
  // read, no snapshot file is removed and that is the error.
  caf::error abandon(uint64_t checkpoint);

  // Removes every checkpoint newer than `checkpoint` (0: all), committed or
  // not, manifest first: after a rollback to `checkpoint`, the newer ones
  // failed validation and the run will write those ids again. Returns the
  // ids whose manifests were removed.
  caf::expected<std::vector<uint64_t>> discard_after(uint64_t checkpoint);

  // Ids of the checkpoints whose manifest exists, ascending. A manifest's
  // presence does not mean it is valid: use load or latest_valid.
  caf::expected<std::vector<uint64_t>> committed() const;

  // Reads and validates checkpoint `checkpoint`: its manifest, then every
  // snapshot it names (every CRC, schema, and agreement with the manifest),
  // and for a delta entry every file of its chain first, in order, each
  // into memory given back at once (read_chain_link's checks); the first
  // damaged file fails the load, named.
  caf::expected<loaded_checkpoint> load(uint64_t checkpoint) const;

  // Reads and validates checkpoint `checkpoint`'s manifest alone (not the
  // snapshots it names): cheap, for whose run it is.
  caf::expected<checkpoint_manifest> manifest(uint64_t checkpoint) const;

  // Reads one validated snapshot of a committed checkpoint: the entry's own
  // file (a delta's chain is neither read nor checked).
  caf::expected<stored_snapshot> read_snapshot(uint64_t checkpoint, uint32_t shard) const;

  // latest_valid for a process that must not hold a checkpoint's bytes (a
  // job's coordinator, whose shards read their own files): every file is
  // read and validated one at a time into memory given back at once, and
  // only the manifest is returned (refs_of gives the shards' refs).
  caf::expected<verified_checkpoint> latest_verified() const;

  // The newest checkpoint that loads; damaged newer ones are listed with
  // file and reason (a damaged chain file makes every checkpoint whose chain
  // holds it invalid, so this falls back to one whose chain does not). errc::not_found if none is valid (its text lists why
  // each one failed).
  caf::expected<latest_checkpoint> latest_valid() const;

  snapshot_store(const snapshot_store&) = delete;
  snapshot_store& operator=(const snapshot_store&) = delete;

 private:
  caf::expected<manifest_entry> write_snapshot_of(const shard_snapshot_msg& snapshot,
                                                  uint64_t expected_checkpoint);
  snapshot_store(std::filesystem::path dir, store_options opts);
  caf::error recover();
  caf::expected<std::vector<uint64_t>> committed_locked() const;
  caf::error apply_retention(uint64_t limit, std::vector<uint64_t>& removed, caf::error* unreadable);
  caf::error check_commit(checkpoint_manifest& m) const;
  caf::expected<std::set<std::string>> named_files(const std::vector<uint64_t>& ids) const;
  caf::error check_chain(const manifest_entry& e, uint64_t checkpoint) const;
  caf::error check_present(const std::string& file, uint64_t bytes) const;
  caf::expected<loaded_checkpoint> load(uint64_t checkpoint, std::string* bad_file, bool keep = true) const;
  template <class Result, class Take>
  caf::expected<Result> newest_loading(bool keep, Take take) const;
  caf::expected<stored_snapshot> read_entry(const checkpoint_manifest& m, const manifest_entry& e,
                                            const std::string& manifest_file, buffer_pool& pool) const;
  caf::expected<stored_snapshot> read_chain(const checkpoint_manifest& m, const manifest_entry& e,
                                            const std::string& manifest_file, buffer_pool& passing,
                                            buffer_pool& own, std::string* bad_file) const;
  std::string next_tmp_tag();

  std::filesystem::path dir_;
  store_options opts_;
  mutable std::mutex commit_mtx_;  // commits, retention, abandon
  mutable std::mutex tag_mtx_;
  uint64_t newest_committed_ = 0;  // guarded by commit_mtx_; 0: none yet
  uint64_t tmp_counter_ = 0;       // guarded by tag_mtx_
};

}  // namespace keel
