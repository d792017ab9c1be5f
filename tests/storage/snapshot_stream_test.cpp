// stream_snapshot (storage/snapshot_stream.hpp): a snapshot written into its
// file chunk by chunk through one buffer reads back as the snapshot
// make_snapshot builds of the same parts; a failure at any write leaves no
// file and names the file and the errno.

#include <cerrno>
#include <cstring>
#include <set>

#include <doctest/doctest.h>

#include "storage/checkpoint_files.hpp"
#include "storage/crc32c.hpp"
#include "storage/faulty_io.hpp"
#include "storage/snapshot_stream.hpp"
#include "tests/storage/storage_fixtures.hpp"

using namespace keel;
using keel::test::temp_dir;
namespace fs = std::filesystem;

namespace {

// A tensor of `n` bytes whose fill writes byte i as f(i), recording where
// each chunk it was handed lies.
struct patterned {
  size_t n;
  unsigned seed;
  std::vector<const unsigned char*>* seen;
  unsigned char at(size_t i) const { return static_cast<unsigned char>(i * seed + (i >> 9)); }
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = at(i);
    return b;
  }
  tensor_writer writer(const std::string& name) const {
    auto self = *this;
    return {name, schema::DType::UINT8, {n}, n, [self](span_source& chunks) {
              size_t i = 0;
              for (auto c = chunks.next(); c.size > 0; c = chunks.next()) {
                self.seen->push_back(c.data);
                for (size_t k = 0; k < c.size; ++k) c.data[k] = self.at(i++);
              }
              auto b = self.bytes();
              return crc32c(b.data(), b.size());
            }};
  }
};

snapshot_header header_of(uint64_t checkpoint) {
  snapshot_header h;
  h.shard = 3;
  h.checkpoint = checkpoint;
  h.step = 40;
  h.applied = {{1, 9}, {0, 7}};
  h.run_id = "run-a";
  h.config_hash = "cfg";
  return h;
}

std::vector<unsigned char> tensor_of(stored_snapshot& s, const std::string& name) {
  for (auto t : s.root().getTensors())
    if (t.getName() == name.c_str()) {
      std::vector<unsigned char> out(tensor_bytes(t));
      REQUIRE(!copy_tensor(t, out.data(), out.size()));
      return out;
    }
  FAIL("no tensor " << name);
  return {};
}

}  // namespace

TEST_CASE("a streamed snapshot reads back as the one built in memory, its chunks written through one buffer") {
  temp_dir dir;
  std::vector<const unsigned char*> seen;
  std::vector<float> dense(300);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = static_cast<float>(i) * 0.5f;
  std::vector<tensor_view> views = {{"dense", schema::DType::FLOAT32, {300}, dense.data(), 1200}};
  // 2500 bytes in chunks of 1000 (a short last one), 3000 (exact), 0 (none).
  patterned a{2500, 7, &seen}, b{3000, 13, &seen}, empty{0, 1, &seen};
  std::vector<tensor_writer> written = {a.writer("table.a"), b.writer("table.b"), empty.writer("table.e")};
  auto s = stream_snapshot(*posix_io(), dir.path(), "ckpt-1.shard-3.snap", "t1", header_of(1), views, written, 1000);
  REQUIRE(s);
  CHECK(seen.size() == 6);
  CHECK(std::set<const unsigned char*>(seen.begin(), seen.end()).size() == 1);  // one buffer
  CHECK(fs::exists(dir.path() / "ckpt-1.shard-3.snap.tmp-t1"));
  CHECK(!fs::exists(dir.path() / "ckpt-1.shard-3.snap"));
  auto summary = s->summary;
  auto entry = commit_streamed(*posix_io(), std::move(*s));
  REQUIRE(entry);
  CHECK(entry->file == "ckpt-1.shard-3.snap");
  CHECK(entry->shard == 3);
  CHECK(!fs::exists(dir.path() / "ckpt-1.shard-3.snap.tmp-t1"));
  CHECK(fs::file_size(dir.path() / entry->file) == summary.file_bytes);

  auto pool = buffer_pool::create(SIZE_MAX, 1);
  manifest_entry found;
  auto read = read_snapshot_file(*posix_io(), dir.path() / entry->file, *pool, verify_mode::checksums, &found);
  REQUIRE(read);
  CHECK(found.bytes == entry->bytes);
  CHECK(found.crc32c == entry->crc32c);
  CHECK(!verify_checksums(read->root()));
  CHECK(read->root().getShard() == 3);
  CHECK(read->root().getCheckpoint() == 1);
  CHECK(read->root().getStep() == 40);
  CHECK(std::string(read->root().getRunId().cStr()) == "run-a");
  CHECK(read->root().getApplied().size() == 2);
  CHECK(tensor_of(*read, "table.a") == a.bytes());
  CHECK(tensor_of(*read, "table.b") == b.bytes());
  CHECK(tensor_of(*read, "table.e").empty());
  auto d = tensor_of(*read, "dense");
  REQUIRE(d.size() == 1200);
  CHECK(std::memcmp(d.data(), dense.data(), 1200) == 0);

  // The same parts built in memory hold the same tensors, CRCs included.
  std::vector<const unsigned char*> seen2;
  patterned a2{2500, 7, &seen2}, b2{3000, 13, &seen2}, e2{0, 1, &seen2};
  auto m = make_snapshot(header_of(1), views, {a2.writer("table.a"), b2.writer("table.b"), e2.writer("table.e")}, 1000);
  REQUIRE(m);
  auto md = decode(*m);
  REQUIRE(md);
  REQUIRE(md->root().getTensors().size() == read->root().getTensors().size());
  for (unsigned i = 0; i < md->root().getTensors().size(); ++i) {
    CHECK(md->root().getTensors()[i].getCrc32c() == read->root().getTensors()[i].getCrc32c());
    CHECK(md->root().getTensors()[i].getChunks().size() == read->root().getTensors()[i].getChunks().size());
  }
}

TEST_CASE("a stream failing at any write, or its commit at fsync or rename, leaves no file and names the errno") {
  std::vector<const unsigned char*> seen;
  patterned a{5000, 3, &seen};
  // Count the writes one stream makes, then fail each in turn.
  uint64_t writes = 0;
  {
    temp_dir dir;
    auto io = faulty_io::wrap();
    auto s = stream_snapshot(*io, dir.path(), "x.snap", "t", header_of(2), {}, {a.writer("table.a")}, 1000);
    REQUIRE(s);
    writes = io->counts().write;
  }
  REQUIRE(writes >= 7);  // 5 chunks, the message, the table, the header
  for (uint64_t nth = 1; nth <= writes; ++nth) {
    CAPTURE(nth);
    temp_dir dir;
    auto io = faulty_io::wrap();
    io->arm(io_fault{io_op::write, nth, ENOSPC});
    auto s = stream_snapshot(*io, dir.path(), "x.snap", "t", header_of(2), {}, {a.writer("table.a")}, 1000);
    REQUIRE(!s);
    CHECK(is(s.error(), errc::io_error));
    CHECK(describe(s.error()).find("x.snap") != std::string::npos);
    CHECK(describe(s.error()).find("ENOSPC") != std::string::npos);
    CHECK(fs::is_empty(dir.path()));
  }
  for (auto op : {io_op::fsync, io_op::rename}) {
    CAPTURE(to_string(op));
    temp_dir dir;
    auto io = faulty_io::wrap();
    auto s = stream_snapshot(*io, dir.path(), "x.snap", "t", header_of(2), {}, {a.writer("table.a")}, 1000);
    REQUIRE(s);
    io->arm(io_fault{op, 1, EIO});
    auto e = commit_streamed(*io, std::move(*s));
    REQUIRE(!e);
    CHECK(describe(e.error()).find("x.snap") != std::string::npos);
    CHECK(describe(e.error()).find("EIO") != std::string::npos);
    CHECK(fs::is_empty(dir.path()));
  }
}

TEST_CASE("a fill that writes less than its tensor, or throws, is refused by name and leaves no file") {
  temp_dir dir;
  tensor_writer short_fill{"table.s", schema::DType::UINT8, {3000}, 3000, [](span_source& chunks) {
                             auto c = chunks.next();  // one chunk of three
                             std::memset(c.data, 1, c.size);
                             return 0u;
                           }};
  auto s = stream_snapshot(*posix_io(), dir.path(), "y.snap", "t", header_of(3), {}, {short_fill}, 1000);
  REQUIRE(!s);
  CHECK(is(s.error(), errc::invalid_argument));
  CHECK(describe(s.error()).find("table.s") != std::string::npos);
  CHECK(fs::is_empty(dir.path()));
  tensor_writer throwing{"table.t", schema::DType::UINT8, {10}, 10,
                         [](span_source&) -> uint32_t { throw std::logic_error("encoder broke"); }};
  s = stream_snapshot(*posix_io(), dir.path(), "y.snap", "t", header_of(3), {}, {throwing}, 1000);
  REQUIRE(!s);
  CHECK(describe(s.error()).find("encoder broke") != std::string::npos);
  CHECK(fs::is_empty(dir.path()));
}
