#include <cstring>
#include <fstream>

#include <doctest/doctest.h>

#include "messages/decode.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/crc32c.hpp"
#include "storage/sealed_file.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

TEST_CASE("a snapshot round-trips through a file: header, applied seqs, chunked tensors, sections") {
  temp_dir dir;
  auto snap = sample_snapshot(5, 3, 64, 1000);  // w is 8 KiB: 9 chunks of <= 1000 bytes
  auto entry = write_snapshot_file(*posix_io(), dir.path(), "s.snap", snap, "t1");
  REQUIRE_MESSAGE(entry, describe(entry.error()));
  CHECK(entry->shard == 3);
  CHECK(entry->bytes == fs::file_size(dir / "s.snap"));
  CHECK(files_in(dir.path()) == std::vector<std::string>{"s.snap"});
  auto pool = buffer_pool::create();
  manifest_entry recorded;
  auto back = read_snapshot_file(*posix_io(), dir / "s.snap", *pool, verify_mode::checksums,
                                 &recorded);
  REQUIRE_MESSAGE(back, describe(back.error()));
  CHECK(recorded.bytes == entry->bytes);
  CHECK(recorded.crc32c == entry->crc32c);
  auto w = back->root().getTensors()[0];
  CHECK(w.getChunks().size() == 9);
  for (auto c : w.getChunks())
    CHECK(c.size() <= 1000);
  check_sample(*back, 5, 3);
  CHECK(back->root().getCreatedUnixMs() == 1700000000005);
}

TEST_CASE("a snapshot file starts with KEELSNAP and is exactly header plus capnp payload") {
  temp_dir dir;
  auto snap = sample_snapshot(1, 0);
  REQUIRE(write_snapshot_file(*posix_io(), dir.path(), "a.snap", snap, "t"));
  std::ifstream in(dir / "a.snap", std::ios::binary);
  char magic[8];
  in.read(magic, 8);
  CHECK(std::string(magic, 8) == "KEELSNAP");
  CHECK(fs::file_size(dir / "a.snap") == sealed_header_bytes + snap.frame()->encoded_size_bytes());
}

TEST_CASE("make_snapshot refuses a tensor whose bytes do not match its shape, naming it") {
  std::vector<float> w(10);
  snapshot_header h;
  h.checkpoint = 1;
  auto snap = make_snapshot(h, {{"layer1.w", schema::DType::FLOAT32, {3, 4}, w.data(), 40}});
  REQUIRE(!snap);
  CHECK(is(snap.error(), errc::invalid_argument));
  CHECK(contains(describe(snap.error()), "'layer1.w' has 40 bytes, but shape [3, 4] of float32 needs 48"));
  auto dup = make_snapshot(h, {{"a", schema::DType::FLOAT32, {10}, w.data(), 40},
                               {"a", schema::DType::FLOAT32, {10}, w.data(), 40}});
  REQUIRE(!dup);
  CHECK(contains(describe(dup.error()), "'a' appears twice"));
  h.applied = {{1, 4}, {1, 5}};
  auto twice = make_snapshot(h, {});
  REQUIRE(!twice);
  CHECK(contains(describe(twice.error()), "worker 1 appears twice"));
}

TEST_CASE("a tensor whose bytes disagree with its CRC is reported by name though the file CRC is intact") {
  temp_dir dir;
  std::vector<float> w(100, 1.5f);
  // Built by hand with a wrong tensor CRC: the file around it is sealed
  // correctly, so only the per-tensor check can catch it.
  auto bad = build<schema::ShardSnapshot>(256, [&](schema::ShardSnapshot::Builder b) {
    b.setMagic(schema::SNAPSHOT_MAGIC);
    b.setFormatVersion(1);
    b.setCheckpoint(1);
    auto t = b.initTensors(1)[0];
    t.setName("embedding");
    t.initShape(1).set(0, 100);
    auto chunk = t.initChunks(1).init(0, 400);
    std::memcpy(chunk.begin(), w.data(), 400);
    t.setCrc32c(crc32c(w.data(), 400) ^ 1u);
  });
  REQUIRE(write_sealed(*posix_io(), dir.path(), "x.snap", snapshot_file_magic, *bad.frame(), "t"));
  auto pool = buffer_pool::create();
  auto back = read_snapshot_file(*posix_io(), dir / "x.snap", *pool);
  REQUIRE(!back);
  CHECK(is(back.error(), errc::damaged_snapshot));
  CHECK(contains(describe(back.error()), "x.snap: tensor 'embedding': CRC32C mismatch"));
  // Structure-only reading (keel inspect without --verify) does not look at CRCs.
  CHECK(read_snapshot_file(*posix_io(), dir / "x.snap", *pool, verify_mode::structure));
}

TEST_CASE("a written tensor holds what its fill wrote into its chunks, as a copied one of the same bytes") {
  std::vector<unsigned char> bytes(2500);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<unsigned char>(i * 7);
  snapshot_header h;
  h.checkpoint = 2;
  std::vector<size_t> chunk_sizes;
  tensor_fill fill = [&](span_source& chunks) {
    size_t at = 0;
    for (auto c = chunks.next(); c.size > 0; c = chunks.next()) {
      chunk_sizes.push_back(c.size);
      std::memcpy(c.data, bytes.data() + at, c.size);
      at += c.size;
    }
    return crc32c(bytes.data(), bytes.size());
  };
  auto written = make_snapshot(h, {}, {{"t", schema::DType::UINT8, {2500}, 2500, fill}}, 1000);
  auto copied =
    make_snapshot(h, {{"t", schema::DType::UINT8, {2500}, bytes.data(), 2500}}, std::vector<section_view>{}, 1000);
  REQUIRE(written);
  REQUIRE(copied);
  CHECK(chunk_sizes == std::vector<size_t>{1000, 1000, 500});
  auto a = written->frame(), b = copied->frame();
  REQUIRE(a->size_words() == b->size_words());
  CHECK(std::memcmp(a->segments()[0].begin(), b->segments()[0].begin(), a->size_words() * 8) == 0);
  auto d = decode(*written);
  REQUIRE(d);
  CHECK(!verify_checksums(d->root()));
  // A writer without a fill, or one of the wrong size, is refused by name.
  auto none = make_snapshot(h, {}, {{"t", schema::DType::UINT8, {2500}, 2500, nullptr}});
  REQUIRE(!none);
  CHECK(contains(describe(none.error()), "'t' has no fill"));
  auto wrong = make_snapshot(h, {}, {{"t", schema::DType::UINT8, {2500}, 2400, fill}});
  REQUIRE(!wrong);
  CHECK(contains(describe(wrong.error()), "'t' has 2400 bytes"));
}

TEST_CASE("make_snapshot records a snapshot's place in a chain: a base is its own base, a delta names its parent") {
  float w[4] = {1, 2, 3, 4};
  snapshot_header h;
  h.shard = 2;
  h.checkpoint = 9;
  auto base = make_snapshot(h, {{"w", schema::DType::FLOAT32, {4}, w, sizeof(w)}});
  REQUIRE(base);
  auto b = decode(*base);
  REQUIRE(b);
  CHECK(std::string(b->root().getParentFile().cStr()).empty());
  CHECK(b->root().getParentCheckpoint() == 0);
  CHECK(b->root().getBaseCheckpoint() == 9);
  h.checkpoint = 11;
  h.parent_file = "ckpt-00000000000000000010.shard-2.snap";
  h.parent_checkpoint = 10;
  h.base_checkpoint = 9;
  auto delta = make_snapshot(h, {{"w", schema::DType::FLOAT32, {4}, w, sizeof(w)}});
  REQUIRE(delta);
  auto d = decode(*delta);
  REQUIRE(d);
  CHECK(std::string(d->root().getParentFile().cStr()) == h.parent_file);
  CHECK(d->root().getParentCheckpoint() == 10);
  CHECK(d->root().getBaseCheckpoint() == 9);
}
