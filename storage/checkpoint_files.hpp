#pragma once
// The two kinds of file a checkpoint is made of, as sealed files
// (storage/sealed_file.hpp): one snapshot file per shard, and the manifest
// that commits them. Reading a snapshot file checks, in order: header magic
// and CRC, format version, length, payload CRC, the ShardSnapshot schema
// (messages/decode.hpp) and every tensor and section CRC; the first failure
// is returned naming the file and the reason, so a damaged snapshot is never
// handed back as good. Functions are thread-safe given a thread-safe file_io.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "messages/buffer_pool.hpp"
#include "messages/decode.hpp"
#include "storage/file_io.hpp"
#include "storage/run_identity.hpp"

namespace keel {

// A snapshot read back from storage and validated; holds its pooled buffer.
using stored_snapshot = decoded<schema::ShardSnapshot>;

enum class verify_mode {
  structure,  // header, length and schema; skips the payload and tensor CRCs
  checksums,  // everything, every CRC included (the default for restores)
  // A file's every byte, once: the payload CRC (which covers the tensors'
  // bytes too) and the schema, not the tensors' own CRCs again. What a
  // shard restoring from its own file needs.
  payload,
};

// One file of a shard's chain (a base or a delta the newer file applies
// on), as the manifest records it (schema ChainLink).
struct chain_link {
  uint64_t checkpoint = 0;
  std::string file;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;

  // The same file: name, checkpoint, size and payload CRC.
  friend bool operator==(const chain_link& a, const chain_link& b) {
    return a.checkpoint == b.checkpoint && a.file == b.file && a.bytes == b.bytes && a.crc32c == b.crc32c;
  }
  friend bool operator!=(const chain_link& a, const chain_link& b) { return !(a == b); }
};

// One shard's snapshot file as the manifest records it.
struct manifest_entry {
  uint32_t shard = 0;
  std::string file;      // a name inside the store's directory
  uint64_t bytes = 0;    // size of the whole file
  uint32_t crc32c = 0;   // the file's payload CRC32C (as in its header)
  // What writing it took (wall, and CPU of the writing thread); 0: not known.
  uint64_t write_us = 0;
  uint64_t write_cpu_us = 0;
  // When `file` is a delta: the files it applies on, base first (empty: a
  // base). Restoring reads them in order, then `file`.
  std::vector<chain_link> chain;
};

// A manifest entry to and from its schema form (one codec for the manifest
// file and for a shard's report of its part).
void set_entry(schema::ManifestEntry::Builder b, const manifest_entry& e);
manifest_entry entry_of(schema::ManifestEntry::Reader r);

// A checkpoint's manifest: which snapshot file each shard restarts from.
struct checkpoint_manifest {
  uint64_t checkpoint = 0;
  uint64_t step = 0;
  int64_t created_unix_ms = 0;
  std::vector<manifest_entry> shards;  // sorted by shard
  run_identity run;                    // the run that committed it (empty: a keel from before)
};

// Reads and validates a snapshot file (see the contract above). If
// `as_recorded` is given, it receives the file's size and payload CRC, which
// a manifest entry must match.
caf::expected<stored_snapshot> read_snapshot_file(file_io& io, const std::filesystem::path& p,
                                                  buffer_pool& pool,
                                                  verify_mode mode = verify_mode::checksums,
                                                  manifest_entry* as_recorded = nullptr);

// Writes `snapshot` as `dir/name` atomically and durably; returns the entry
// a manifest records for it.
caf::expected<manifest_entry> write_snapshot_file(file_io& io, const std::filesystem::path& dir,
                                                  const std::string& name,
                                                  const shard_snapshot_msg& snapshot,
                                                  const std::string& tmp_tag);

// The same, decoding (validating) the snapshot once: `name_of` sees the
// decoded snapshot and returns its file name, or an error that refuses it
// (nothing is written then).
using snapshot_namer =
  std::function<caf::expected<std::string>(schema::ShardSnapshot::Reader)>;
caf::expected<manifest_entry> write_snapshot_file(file_io& io, const std::filesystem::path& dir,
                                                  const shard_snapshot_msg& snapshot,
                                                  const std::string& tmp_tag,
                                                  const snapshot_namer& name_of);

// Reads the snapshot that manifest `m` (stored as `manifest_file` in `dir`)
// names in `entry`, validates it with `mode`, and checks it is the very file
// that was committed: same size and payload CRC, same checkpoint and shard,
// same run and configuration hash, and its place in the entry's chain (a
// base when the entry has no chain, else a delta on the chain's last file;
// see read_chain_link). Of a delta it reads that file alone, not its chain.
// A missing file is errc::damaged_snapshot naming both files.
caf::expected<stored_snapshot> read_committed_snapshot(file_io& io, const std::filesystem::path& dir,
                                                       const std::string& manifest_file,
                                                       const checkpoint_manifest& m,
                                                       const manifest_entry& entry,
                                                       buffer_pool& pool,
                                                       verify_mode mode = verify_mode::checksums);

// The same for file `i` of the entry's chain (read_chain_link says which).
caf::expected<stored_snapshot> read_committed_link(file_io& io, const std::filesystem::path& dir,
                                                   const std::string& manifest_file,
                                                   const checkpoint_manifest& m, const manifest_entry& entry,
                                                   size_t i, buffer_pool& pool,
                                                   verify_mode mode = verify_mode::checksums);

// Where one committed snapshot file lies and what it must hold: enough for
// any process that reaches the directory (a restarted shard, on whatever
// node) to read and validate it alone, without the manifest. A plain value.
struct snapshot_ref {
  std::string dir;  // the checkpoint directory
  uint64_t checkpoint = 0;
  uint64_t step = 0;  // the shard's snapshot step
  manifest_entry entry;
  std::string run_id;  // the run and configuration the manifest records
  std::string config_hash;
};

// The files restoring `ref` reads, in order: its chain (base first), then
// its own file (a base alone: that file).
std::vector<chain_link> chain_files(const snapshot_ref& ref);

// Whether `prefix` is the start of `files` (or all of them): a restore from
// `files` can take a state restored from `prefix` and apply the rest.
bool chain_starts_with(const std::vector<chain_link>& files, const std::vector<chain_link>& prefix);

// The refs of manifest `m` in `dir`, by shard.
std::vector<snapshot_ref> refs_of(const std::filesystem::path& dir, const checkpoint_manifest& m);

// Reads the file `ref` names, which must be a whole snapshot (a base: an
// entry without a chain), and validates it as read_committed_snapshot does:
// every CRC (with `mode` checksums), the very file committed (size and
// payload CRC), its checkpoint and shard, its run and configuration hash,
// and that it is a base. A ref to a delta is refused (errc::invalid_argument
// naming the file): it holds only what changed, and restoring from it alone
// would lose the rest; read its chain with read_chain_link.
caf::expected<stored_snapshot> read_snapshot_ref(file_io& io, const snapshot_ref& ref, buffer_pool& pool,
                                                 verify_mode mode = verify_mode::checksums);

// Reads file `i` of `ref`'s chain: i < chain.size() is chain[i] (0 the
// base), i == chain.size() the entry's own file; restoring applies them in
// order 0..chain.size(), one at a time. Validates it as read_snapshot_ref
// does, against the link's recorded size, payload CRC and checkpoint (the
// ref's run and configuration hash, the entry's shard), and checks its
// place in the chain: file 0 is a base (no parent file; its base checkpoint
// its own, or 0 in files of a keel from before chains), every file i > 0 a
// delta whose parent file and checkpoint are file i-1's and whose base is
// file 0's checkpoint. Failures are errc::damaged_snapshot naming the file
// and why, e.g. "ckpt-..7.shard-1.<tag>.snap: a delta on ckpt-..6.shard-1.
// <tag1>.snap, but the chain says ckpt-..6.shard-1.<tag2>.snap"; an `i`
// past the chain is errc::invalid_argument.
caf::expected<stored_snapshot> read_chain_link(file_io& io, const snapshot_ref& ref, size_t i, buffer_pool& pool,
                                               verify_mode mode = verify_mode::checksums);

// Checks `copy`, a frame held in memory that claims to be file `i` of `ref`'s
// chain (a peer's copy, storage-free: actors/ps/snapshot_replica.hpp), as
// read_chain_link with verify_mode::payload checks the file: the sealed file
// it would make has the link's recorded size and payload CRC (every byte
// once), then the schema, checkpoint, shard, run, configuration hash and its
// place in the chain. Failures are errc::damaged_snapshot naming the file
// and "(a copy in memory)"; an `i` past the chain is errc::invalid_argument.
caf::expected<stored_snapshot> check_chain_link_copy(const snapshot_ref& ref, size_t i,
                                                     const shard_snapshot_msg& copy);

// Reads and validates a manifest file (header, CRCs, schema).
caf::expected<checkpoint_manifest> read_manifest_file(file_io& io, const std::filesystem::path& p,
                                                      buffer_pool& pool);

// Whether manifest `m` (stored as `manifest_file`) records the step its
// snapshots were taken at: the largest of its entries' own files' steps,
// `largest_snapshot_step` (shards of an SSP or ASP run may stand at
// different steps). A manifest that says otherwise is damaged
// (errc::damaged_snapshot naming it and both steps): resuming from it
// would start at a step no shard holds.
caf::error check_manifest_step(const checkpoint_manifest& m, const std::string& manifest_file,
                               uint64_t largest_snapshot_step);

// Writes `m` as `dir/name` atomically and durably.
caf::error write_manifest_file(file_io& io, const std::filesystem::path& dir,
                               const std::string& name, const checkpoint_manifest& m,
                               const std::string& tmp_tag);

}  // namespace keel
