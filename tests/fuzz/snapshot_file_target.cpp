// fuzz_one_snapshot_file: bytes -> read_snapshot_file (sealed header, frame,
// ShardSnapshot schema, CRCs) -> restore_shard, the path a restarted shard's
// state takes from storage (see fuzz_targets.hpp).
//
// Byte 0 holds flags:
//   bit 0     the rest is a payload only; the harness seals it (sealed_input.hpp)
//   bit 1     read with verify_mode::structure instead of checksums
//   bits 2-3  the optimizer of the shard restored into (sgd, momentum, adagrad, adam)
//   bit 4     the shard owns only 64 sparse keys instead of every key above its dense ones

#include <limits>

#include <kj/exception.h>

#include "actors/core/shard_snapshot.hpp"
#include "fuzz_targets.hpp"
#include "invariant.hpp"
#include "memory_io.hpp"
#include "message_invariants.hpp"
#include "sealed_input.hpp"
#include "shard_state.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/sealed_file.hpp"

namespace keel::fuzz {

namespace {

constexpr const char* target = "fuzz_snapshot_file";
constexpr uint64_t max_fitted_keys = uint64_t{1} << 16;
constexpr uint32_t max_fitted_workers = 256;

struct snapshot_flags {
  bool payload_only;
  verify_mode mode;
  optimizer_kind optimizer;
  bool narrow_sparse;
};

snapshot_flags flags_of(uint8_t b) {
  static constexpr optimizer_kind kinds[] = {optimizer_kind::sgd, optimizer_kind::momentum,
                                             optimizer_kind::adagrad, optimizer_kind::adam};
  return {(b & 1) != 0, (b & 2) != 0 ? verify_mode::structure : verify_mode::checksums,
          kinds[(b >> 2) & 3], (b & 16) != 0};
}

// The length of a rank-1 tensor `name`, if the snapshot has one.
uint64_t rank1_length(schema::ShardSnapshot::Reader s, const char* name, uint64_t otherwise) {
  for (auto t : s.getTensors())
    if (t.getName() == name && t.getShape().size() == 1)
      return t.getShape()[0];
  return otherwise;
}

// A shard configuration that agrees with what the snapshot claims about
// itself (within small caps), so that restore_shard's later checks are
// reached instead of failing on the first shape. Read through its own reader:
// the harness must not spend the traversal budget of the decoded snapshot.
shard_config fitted_config(const frame& f, const snapshot_flags& flags) {
  shard_config cfg;
  cfg.optimizer.kind = flags.optimizer;
  uint64_t dense = 8;
  uint64_t workers = 2;
  try {
    capnp::SegmentArrayMessageReader reader(f.segments(), rereading_options(f));
    auto s = reader.getRoot<schema::ShardSnapshot>();
    cfg.shard = s.getShard();
    dense = rank1_length(s, "dense", dense);
    workers = rank1_length(s, "workers.clock", workers);
  } catch (const kj::Exception&) {
  }
  dense = std::min(dense, max_fitted_keys);
  cfg.num_workers = static_cast<uint32_t>(std::min<uint64_t>(workers, max_fitted_workers));
  cfg.dense = {0, dense};
  cfg.sparse = {dense, flags.narrow_sparse ? dense + 64 : std::numeric_limits<uint64_t>::max()};
  return cfg;
}

// A restored shard, snapshotted again, written and read back through the
// storage layer and restored, must be the same shard.
void check_restore_round_trip(const shard_core& restored, const shard_config& cfg,
                              schema::ShardSnapshot::Reader original, memory_io& io,
                              buffer_pool& pool) {
  auto again = snapshot_of(restored, original.getCheckpoint(), original.getCreatedUnixMs());
  require(static_cast<bool>(again), target, "a restored shard cannot be snapshotted");
  auto entry = write_snapshot_file(io, "/fuzz", "again.snap", *again, "fuzz");
  require(static_cast<bool>(entry), target,
          "a restored shard's snapshot cannot be written: " +
            (entry ? std::string() : describe(entry.error())));
  auto reread = read_snapshot_file(io, "/fuzz/again.snap", pool);
  require(static_cast<bool>(reread), target,
          "a restored shard's snapshot does not read back: " +
            (reread ? std::string() : describe(reread.error())));
  auto twice = restore_shard(cfg, reread->root());
  require(static_cast<bool>(twice), target,
          "a restored shard's own snapshot does not restore: " +
            (twice ? std::string() : describe(twice.error())));
  require(same_shard_state(restored, *twice), target,
          "restoring a restored shard's snapshot gives a different state");
}

}  // namespace

int fuzz_one_snapshot_file(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  auto flags = flags_of(data[0]);
  memory_io io;
  if (flags.payload_only)
    io.put("/fuzz/input.snap", seal(snapshot_file_magic, data + 1, size - 1));
  else
    io.put("/fuzz/input.snap", memory_io::bytes(data + 1, data + size));
  auto pool = buffer_pool::create(size_t{4} << 20);
  manifest_entry recorded;
  auto snap = read_snapshot_file(io, "/fuzz/input.snap", *pool, flags.mode, &recorded);
  if (!snap)
    return 0;
  require(recorded.bytes == io.get("/fuzz/input.snap")->size(), target,
          "the recorded size of an accepted snapshot is not the file's size");
  require(recorded.shard == snap->root().getShard() && recorded.file == "input.snap", target,
          "an accepted snapshot records another shard or file name");
  auto cfg = fitted_config(*snap->source(), flags);
  auto restored = restore_shard(cfg, snap->root());
  if (!restored)
    return 0;
  check_restore_round_trip(*restored, cfg, snap->root(), io, *pool);
  return 0;
}

}  // namespace keel::fuzz
