// replica_store (actors/core/replica_store.hpp): a node's in-memory copies of
// its peers' shards' newest checkpoint chains (keep, supersede, serve,
// miss), and check_chain_link_copy (storage/checkpoint_files.hpp), which
// checks a copy as the file it stands for.
#include "actors/core/replica_store.hpp"

#include <doctest/doctest.h>

#include "messages/errors.hpp"
#include "storage/sealed_file.hpp"
#include "storage/snapshot.hpp"

using namespace keel;

namespace {

// A minimal snapshot frame of (checkpoint, shard), a delta on `parent` when given.
shard_snapshot_msg frame_of(uint64_t checkpoint, uint32_t shard, const std::string& parent = {},
                            uint64_t parent_checkpoint = 0, uint64_t base = 0) {
  return build<schema::ShardSnapshot>(64, [&](schema::ShardSnapshot::Builder b) {
    b.setVersion(schema::PROTOCOL_VERSION);
    b.setMagic(schema::SNAPSHOT_MAGIC);
    b.setFormatVersion(snapshot_format_version);
    b.setCheckpoint(checkpoint);
    b.setShard(shard);
    b.setRunId("run");
    b.setConfigHash("hash");
    b.setParentFile(parent);
    b.setParentCheckpoint(parent_checkpoint);
    b.setBaseCheckpoint(base == 0 ? checkpoint : base);
  });
}

// The record a manifest would hold of `frame` written as `name`.
chain_link link_of(uint64_t checkpoint, const std::string& name, const shard_snapshot_msg& frame) {
  auto s = sealed_summary_of(*frame.frame());
  return {checkpoint, name, s.file_bytes, s.payload_crc32c};
}

bool holds(const replica_store& r, const chain_link& l) {
  return r.find(l.file, l.bytes, l.crc32c).has_value();
}

}  // namespace

TEST_CASE("a replica keeps a shard's chain, serves each file by name, size and CRC, and misses anything else") {
  replica_store r;
  auto f1 = frame_of(1, 0);
  auto l1 = link_of(1, "ckpt-1.shard-0.snap", f1);
  auto f2 = frame_of(2, 0, l1.file, 1, 1);
  auto l2 = link_of(2, "ckpt-2.shard-0.snap", f2);
  CHECK(r.keep("job", 0, l1, {}, f1));
  CHECK(r.keep("job", 0, l2, {l1}, f2));
  CHECK(r.files() == 2);
  auto got = r.find(l2.file, l2.bytes, l2.crc32c);
  REQUIRE(got);
  CHECK(got->frame() == f2.frame());  // the very frame: no copy
  CHECK_FALSE(r.find(l2.file, l2.bytes, l2.crc32c + 1));  // another CRC: another file
  CHECK_FALSE(r.find(l2.file, l2.bytes + 8, l2.crc32c));
  CHECK_FALSE(r.find("ckpt-9.shard-0.snap", l2.bytes, l2.crc32c));
  CHECK(r.bytes() == (f1.frame()->size_words() + f2.frame()->size_words()) * sizeof(capnp::word));
}

TEST_CASE("a replica drops a shard's older chain once a newer base supersedes it, and refuses an older file") {
  replica_store r;
  auto f1 = frame_of(1, 0);
  auto l1 = link_of(1, "ckpt-1.shard-0.snap", f1);
  auto f2 = frame_of(2, 0, l1.file, 1, 1);
  auto l2 = link_of(2, "ckpt-2.shard-0.snap", f2);
  auto f3 = frame_of(3, 0);
  auto l3 = link_of(3, "ckpt-3.shard-0.snap", f3);
  auto other = frame_of(1, 1);
  auto lo = link_of(1, "ckpt-1.shard-1.snap", other);
  r.keep("job", 0, l1, {}, f1);
  r.keep("job", 0, l2, {l1}, f2);
  r.keep("job", 1, lo, {}, other);
  r.keep("job", 0, l3, {}, f3);  // a new base
  CHECK_FALSE(holds(r, l1));
  CHECK_FALSE(holds(r, l2));
  CHECK(holds(r, l3));
  CHECK(holds(r, lo));  // another shard's chain stays
  CHECK_FALSE(r.keep("job", 0, l2, {l1}, f2));  // older than the newest kept
  CHECK_FALSE(holds(r, l2));
  CHECK(r.bytes() == (f3.frame()->size_words() + other.frame()->size_words()) * sizeof(capnp::word));
  CHECK(r.peak_bytes() >= r.bytes() + f1.frame()->size_words() * sizeof(capnp::word));
}

TEST_CASE("a shard's copy from another run (the next job, a resume) replaces the older run's chain of that shard") {
  replica_store r;
  auto f1 = frame_of(1, 0);
  auto l1 = link_of(1, "ckpt-1.shard-0.a.snap", f1);
  auto f2 = frame_of(2, 0, l1.file, 1, 1);
  auto l2 = link_of(2, "ckpt-2.shard-0.a.snap", f2);
  auto g1 = frame_of(1, 0);
  auto m1 = link_of(1, "ckpt-1.shard-0.b.snap", g1);
  r.keep("run-a", 0, l1, {}, f1);
  r.keep("run-a", 0, l2, {l1}, f2);
  CHECK(r.keep("run-b", 0, m1, {}, g1));  // an older checkpoint id, but of another run
  CHECK_FALSE(holds(r, l1));
  CHECK_FALSE(holds(r, l2));
  CHECK(holds(r, m1));
  CHECK(r.files() == 1);
  CHECK(r.bytes() == g1.frame()->size_words() * sizeof(capnp::word));
}

TEST_CASE("a copy in memory is checked as the file it stands for: its size and CRC as recorded, its place in the chain") {
  auto f1 = frame_of(1, 0);
  auto l1 = link_of(1, "ckpt-1.shard-0.snap", f1);
  auto f2 = frame_of(2, 0, l1.file, 1, 1);
  auto l2 = link_of(2, "ckpt-2.shard-0.snap", f2);
  snapshot_ref ref{"/nowhere", 2, 20, manifest_entry{0, l2.file, l2.bytes, l2.crc32c, 0, 0, {l1}}, "run", "hash"};
  for (size_t i = 0; i < 2; ++i) {
    auto ok = check_chain_link_copy(ref, i, i == 0 ? f1 : f2);
    CHECK_MESSAGE(ok, (ok ? std::string() : describe(ok.error())));
  }
  auto swapped = check_chain_link_copy(ref, 0, f2);  // another file's bytes
  REQUIRE_FALSE(swapped);
  CHECK(is(swapped.error(), errc::damaged_snapshot));
  CHECK_MESSAGE(describe(swapped.error()).find("ckpt-1.shard-0.snap: a copy in memory of") != std::string::npos,
                describe(swapped.error()));
  auto other_run = ref;
  other_run.run_id = "another";
  auto bad = check_chain_link_copy(other_run, 1, f2);
  REQUIRE_FALSE(bad);
  CHECK(describe(bad.error()).find("(a copy in memory)") != std::string::npos);
  CHECK(is(check_chain_link_copy(ref, 2, f2).error(), errc::invalid_argument));
  CHECK(is(check_chain_link_copy(ref, 0, shard_snapshot_msg{}).error(), errc::damaged_snapshot));
}
