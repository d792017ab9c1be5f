// fuzz_one_manifest_file: bytes -> read_manifest_file (sealed header, frame,
// CheckpointManifest schema), the path by which a restart learns which
// snapshot each shard restarts from (see fuzz_targets.hpp).
//
// Byte 0 holds flags: bit 0 means the rest is a payload only, which the
// harness seals (sealed_input.hpp); otherwise the rest is the whole file.

#include "fuzz_targets.hpp"
#include "invariant.hpp"
#include "memory_io.hpp"
#include "sealed_input.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/sealed_file.hpp"

namespace keel::fuzz {

namespace {

constexpr const char* target = "fuzz_manifest_file";

bool same_manifest(const checkpoint_manifest& a, const checkpoint_manifest& b) {
  if (a.checkpoint != b.checkpoint || a.step != b.step || a.created_unix_ms != b.created_unix_ms ||
      a.shards.size() != b.shards.size())
    return false;
  for (size_t i = 0; i < a.shards.size(); ++i) {
    const auto& x = a.shards[i];
    const auto& y = b.shards[i];
    if (x.shard != y.shard || x.file != y.file || x.bytes != y.bytes || x.crc32c != y.crc32c ||
        x.chain.size() != y.chain.size())
      return false;
    for (size_t j = 0; j < x.chain.size(); ++j)
      if (x.chain[j].checkpoint != y.chain[j].checkpoint || x.chain[j].file != y.chain[j].file ||
          x.chain[j].bytes != y.chain[j].bytes || x.chain[j].crc32c != y.chain[j].crc32c)
        return false;
  }
  return true;
}

void check_entries(const checkpoint_manifest& m) {
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const auto& file = m.shards[i].file;
    require(i == 0 || m.shards[i - 1].shard < m.shards[i].shard, target,
            "an accepted manifest's entries are not strictly increasing by shard");
    require(!file.empty() && file != "." && file != ".." && file.find('/') == std::string::npos &&
              file.find('\0') == std::string::npos,
            target, "an accepted manifest names '" + file + "', not a plain file name");
  }
}

}  // namespace

int fuzz_one_manifest_file(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  memory_io io;
  if ((data[0] & 1) != 0)
    io.put("/fuzz/MANIFEST", seal(manifest_file_magic, data + 1, size - 1));
  else
    io.put("/fuzz/MANIFEST", memory_io::bytes(data + 1, data + size));
  auto pool = buffer_pool::create(size_t{4} << 20);
  auto m = read_manifest_file(io, "/fuzz/MANIFEST", *pool);
  if (!m)
    return 0;
  check_entries(*m);
  auto err = write_manifest_file(io, "/fuzz", "MANIFEST.again", *m, "fuzz");
  require(!err, target, "an accepted manifest cannot be written back: " + describe(err));
  auto again = read_manifest_file(io, "/fuzz/MANIFEST.again", *pool);
  require(static_cast<bool>(again), target,
          "a manifest written back does not read back: " +
            (again ? std::string() : describe(again.error())));
  require(same_manifest(*m, *again), target, "a manifest written back reads back different");
  return 0;
}

}  // namespace keel::fuzz
