// Every kind of damage a crash or a failing disk leaves, at the header, the
// middle and the tail of a stored file, must be detected: the damaged
// checkpoint is skipped, the report names the file and the reason, and the
// previous checkpoint is what latest_valid returns.
#include <fstream>
#include <functional>

#include <doctest/doctest.h>

#include "storage/crc32c.hpp"
#include "storage/file_damage.hpp"
#include "storage/faulty_io.hpp"
#include "storage/sealed_file.hpp"
#include "storage/store_layout.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

enum class target { snapshot, manifest };

struct damage_case {
  const char* name;
  target where;
  // Damages the file at `p` whose size is `size`.
  std::function<caf::error(const fs::path& p, uint64_t size)> damage;
  const char* reason;  // a phrase the report must contain
};

// Checkpoints 1 and 2 committed, then `c` applied to a file of checkpoint 2.
void check_detected(const damage_case& c) {
  CAPTURE(c.name);
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  auto file = c.where == target::snapshot ? snapshot_name(2, 1) : manifest_name(2);
  auto path = dir / file;
  REQUIRE(!c.damage(path, fs::file_size(path)));
  auto latest = (*store)->latest_valid();
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  CHECK(latest->checkpoint.manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 1);
  CHECK(latest->skipped[0].file == file);
  auto reason = describe(latest->skipped[0].reason);
  CHECK_MESSAGE(contains(reason, file), reason);
  CHECK_MESSAGE(contains(reason, c.reason), reason);
  CHECK(!(*store)->load(2));
  check_sample(*latest->checkpoint.shard(1), 1, 1);
}

std::function<caf::error(const fs::path&, uint64_t)> truncate_to(std::function<uint64_t(uint64_t)> at) {
  return [at](const fs::path& p, uint64_t size) { return truncate_file(p, at(size)); };
}

std::function<caf::error(const fs::path&, uint64_t)> flip_at(std::function<uint64_t(uint64_t)> at) {
  return [at](const fs::path& p, uint64_t size) { return flip_bit(p, at(size), 3); };
}

// A torn write as a crash leaves it: a page-sized region that never reached
// the disk reads back as zeros.
std::function<caf::error(const fs::path&, uint64_t)> tear_at(std::function<uint64_t(uint64_t)> at) {
  return [at](const fs::path& p, uint64_t size) { return zero_range(p, at(size), 4096); };
}

uint64_t header(uint64_t) {
  return 20;  // inside the payload-length field
}
uint64_t middle(uint64_t size) {
  return size / 2;
}
uint64_t tail(uint64_t size) {
  return size - 1;
}

}  // namespace

TEST_CASE("truncation, bit flips and torn writes at the header, middle and tail are detected and reported") {
  std::vector<damage_case> cases;
  for (auto where : {target::snapshot, target::manifest}) {
    cases.push_back({"truncated inside the header", where, truncate_to([](uint64_t) { return 10; }),
                     "shorter than the 32-byte header"});
    cases.push_back({"truncated to nothing", where, truncate_to([](uint64_t) { return 0; }),
                     "truncated to 0 bytes"});
    cases.push_back({"truncated in the middle", where, truncate_to(middle), "(truncated)"});
    cases.push_back({"truncated by one byte", where, truncate_to(tail), "(truncated)"});
    cases.push_back({"bit flip in the header", where, flip_at(header), "header CRC32C mismatch"});
    cases.push_back({"bit flip in the middle", where, flip_at(middle), "payload CRC32C mismatch"});
    cases.push_back({"bit flip in the last byte", where, flip_at(tail), "payload CRC32C mismatch"});
    cases.push_back({"torn at the header", where, tear_at([](uint64_t) { return 0; }), "wrong magic"});
    cases.push_back({"torn in the middle", where, tear_at(middle), "payload CRC32C mismatch"});
    cases.push_back({"torn at the tail", where, tear_at([](uint64_t size) { return size - 24; }),
                     "payload CRC32C mismatch"});
    cases.push_back({"wrong magic", where,
                     [](const fs::path& p, uint64_t) { return overwrite(p, 0, "NOTKEEL!"); },
                     "wrong magic \"NOTKEEL!\""});
  }
  for (auto& c : cases)
    check_detected(c);
}

TEST_CASE("a file written by an unknown format version is refused as unsupported, naming the file") {
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  // Version 2 with a header CRC that matches: a file from a newer keel, not damage.
  auto p = dir / snapshot_name(2, 0);
  std::string v2 = "\x02\x00";
  REQUIRE(!overwrite(p, 8, v2));
  std::ifstream in(p, std::ios::binary);
  std::string head(28, '\0');
  in.read(head.data(), 28);
  auto crc = crc32c(head.data(), 28);
  std::string crc_bytes(4, '\0');
  for (int i = 0; i < 4; ++i)
    crc_bytes[static_cast<size_t>(i)] = static_cast<char>((crc >> (8 * i)) & 0xff);
  REQUIRE(!overwrite(p, 28, crc_bytes));
  auto latest = (*store)->latest_valid();
  REQUIRE(latest);
  CHECK(latest->checkpoint.manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 1);
  CHECK(is(latest->skipped[0].reason, errc::unsupported_version));
  CHECK(contains(describe(latest->skipped[0].reason), snapshot_name(2, 0) + ": file format version 2"));
}

TEST_CASE("a snapshot whose own magic or format version is wrong is refused by the schema check") {
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  for (int variant = 0; variant < 2; ++variant) {
    CAPTURE(variant);
    // A correctly sealed file around a ShardSnapshot with a bad magic or version.
    auto bad = build<schema::ShardSnapshot>(64, [&](schema::ShardSnapshot::Builder b) {
      b.setMagic(variant == 0 ? 0x1234 : schema::SNAPSHOT_MAGIC);
      b.setFormatVersion(variant == 0 ? 1 : 9);
      b.setCheckpoint(2);
    });
    auto name = snapshot_name(2, 0);
    fs::remove(dir / name);
    REQUIRE(write_sealed(*posix_io(), dir.path(), name, snapshot_file_magic, *bad.frame(), "t"));
    auto latest = (*store)->latest_valid();
    REQUIRE(latest);
    CHECK(latest->checkpoint.manifest.checkpoint == 1);
    REQUIRE(latest->skipped.size() == 1);
    auto reason = describe(latest->skipped[0].reason);
    CHECK_MESSAGE(contains(reason, variant == 0 ? "magic: is not KEELSNAP" : "formatVersion: 9"), reason);
  }
}

TEST_CASE("a checkpoint whose manifest is missing does not exist, and its snapshots are removed on open") {
  temp_dir dir;
  {
    auto store = snapshot_store::open(dir.path());
    REQUIRE(store);
    commit_sample(**store, 1);
    commit_sample(**store, 2);
    fs::remove(dir / manifest_name(2));
    auto latest = (*store)->latest_valid();
    REQUIRE(latest);
    CHECK(latest->checkpoint.manifest.checkpoint == 1);
    CHECK(latest->skipped.empty());
    auto load = (*store)->load(2);
    REQUIRE(!load);
    CHECK(is(load.error(), errc::not_found));
    CHECK(contains(describe(load.error()), manifest_name(2) + " is missing"));
  }
  auto reopened = snapshot_store::open(dir.path());
  REQUIRE(reopened);
  CHECK(!fs::exists(dir / snapshot_name(2, 0)));
  CHECK(!fs::exists(dir / snapshot_name(2, 1)));
  CHECK(*(*reopened)->committed() == std::vector<uint64_t>{1});
}

TEST_CASE("a manifest naming a missing snapshot file is reported with both names, and skipped") {
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  fs::remove(dir / snapshot_name(2, 1));
  auto latest = (*store)->latest_valid();
  REQUIRE(latest);
  CHECK(latest->checkpoint.manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 1);
  CHECK(latest->skipped[0].file == snapshot_name(2, 1));
  auto reason = describe(latest->skipped[0].reason);
  CHECK(contains(reason, snapshot_name(2, 1) + ": missing, but " + manifest_name(2) + " names it"));
}

TEST_CASE("a snapshot file swapped for another valid one is caught by the manifest's size and CRC") {
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  fs::copy_file(dir / snapshot_name(2, 0), dir / snapshot_name(2, 1),
                fs::copy_options::overwrite_existing);
  auto latest = (*store)->latest_valid();
  REQUIRE(latest);
  CHECK(latest->checkpoint.manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 1);
  CHECK(contains(describe(latest->skipped[0].reason), "is not the file"));
}

TEST_CASE("when every checkpoint is damaged latest_valid fails and lists each file and reason") {
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  REQUIRE(!flip_bit(dir / snapshot_name(1, 0), 100));
  REQUIRE(!truncate_file(dir / manifest_name(2), 40));
  auto latest = (*store)->latest_valid();
  REQUIRE(!latest);
  CHECK(is(latest.error(), errc::not_found));
  auto text = describe(latest.error());
  CHECK(contains(text, "no valid checkpoint"));
  CHECK(contains(text, snapshot_name(1, 0)));
  CHECK(contains(text, manifest_name(2)));
}
