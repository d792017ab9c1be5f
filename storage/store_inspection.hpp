#pragma once
// A read-only report of a snapshot store's directory, for `keel inspect`
// and for operators: every committed checkpoint (newest first) with its
// step, shards, tensors, shapes and sizes, whether it is valid, and for
// each damaged file the reason; for each shard whether its file is a base
// or a delta, and a delta's chain (its base checkpoint, its files, their
// bytes), every file of which is validated too; plus the files a crashed
// writer left (temporary files, snapshots without a manifest that no
// manifest names in a chain; none when a manifest is unreadable, as then
// the store keeps every snapshot file). Unlike
// snapshot_store::open it never changes the directory. With
// verify_mode::checksums every CRC is checked; with structure, headers,
// lengths and schemas only. Thread-safe given a thread-safe file_io.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "storage/snapshot_store.hpp"

namespace keel {

struct tensor_summary {
  std::string name;
  schema::DType dtype = schema::DType::FLOAT32;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
  uint32_t chunks = 0;
};

// One file of a delta's chain, as the manifest records it, and whether it
// validated (its damage is in the checkpoint's `damage`).
struct chain_file_summary {
  uint64_t checkpoint = 0;
  std::string file;
  uint64_t bytes = 0;
  bool damaged = false;
};

struct snapshot_summary {
  uint32_t shard = 0;
  std::string file;
  uint64_t file_bytes = 0;
  uint64_t step = 0;
  uint64_t shard_version = 0;
  size_t workers = 0;  // entries in applied[]
  uint64_t write_us = 0;  // what writing the file took its shard (0: not recorded)
  std::string run_id;  // the run that took it (empty: a keel from before run ids)
  // A delta applies on `chain` (base first; the entry's own file is not in
  // it); a base has none.
  bool delta() const { return !chain.empty(); }
  uint64_t base_checkpoint = 0;           // the chain's base (a base: its own checkpoint)
  std::vector<chain_file_summary> chain;  // the files before this one
  uint64_t chain_bytes() const;           // of the files in `chain` and this one
  std::vector<tensor_summary> tensors;
  std::vector<std::pair<std::string, uint64_t>> sections;  // name, bytes
};

struct checkpoint_summary {
  uint64_t checkpoint = 0;
  std::string manifest_file;
  uint64_t step = 0;            // 0 if the manifest is unreadable
  int64_t created_unix_ms = 0;
  run_identity run;                      // of the manifest (empty: unreadable, or a keel from before)
  std::vector<snapshot_summary> shards;  // the readable ones
  std::vector<damage_report> damage;     // every damaged file, with its reason
  bool valid() const { return damage.empty(); }
};

struct store_summary {
  std::filesystem::path dir;
  verify_mode mode = verify_mode::structure;
  std::vector<checkpoint_summary> checkpoints;  // newest first
  std::vector<std::string> leftovers;           // temporary and uncommitted files
  size_t damaged() const;
};

// Inspects `dir`. Fails only if `dir` cannot be listed (errc::not_found if
// it does not exist); damage is reported inside the summary.
caf::expected<store_summary> inspect_store(const std::filesystem::path& dir, verify_mode mode,
                                           file_io& io = *posix_io(),
                                           buffer_pool& pool = *buffer_pool::process_default());

}  // namespace keel
