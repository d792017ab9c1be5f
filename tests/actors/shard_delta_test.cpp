// Incremental shard snapshots (actors/core/shard_delta.hpp): a base and the
// deltas after it restore the shard they were taken from, which then
// continues bit-identically; a delta holds only the dense chunks and rows
// that changed; a chain out of order, a delta restored alone and a delta on
// another parent are refused by name.
#include "actors/core/shard_delta.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <vector>

#include "actors/core/shard_snapshot.hpp"
#include "actors/core/shard_stream.hpp"
#include "actors/core/table_snapshot.hpp"
#include "shard_table_fixture.hpp"
#include "storage/snapshot.hpp"

using namespace keel;
using namespace keel::shard_table_test;

namespace {

// Three dense chunks (the last a short one), Adam (two state slots), a table.
shard_config delta_config() {
  auto c = table_config_of(consistency_kind::asp, 1);
  c.dense = {0, 2 * shard_core::dense_chunk_floats + 100};
  c.sparse = {c.dense.end, c.dense.end};
  c.optimizer.kind = optimizer_kind::adam;
  c.optimizer.lr = 0.01f;
  return c;
}

shard_core fresh_delta_shard(const shard_config& c) {
  auto core = shard_core::make(c, std::vector<float>(c.dense.size(), 0.5f), init_rows);
  REQUIRE_MESSAGE(core, describe(core.error()));
  return std::move(*core);
}

// A push of seq `seq`: gradients on dense keys [first, first + 10) and rows
// of `keys`.
void push_at(shard_core& s, uint64_t seq, uint64_t first, const std::vector<uint64_t>& keys) {
  std::vector<float> rows(keys.size() * dim, 0.125f * static_cast<float>(seq));
  std::vector<float> g(10, -0.25f * static_cast<float>(seq));
  auto o = s.offer(table_push(0, seq, seq - 1, {{0, dim, keys, rows}}, {{first, g}}));
  REQUIRE(o.status == schema::PushAck::Status::APPLIED);
}

void same_shard(const shard_core& a, const shard_core& b) {
  CHECK(a.dense() == b.dense());
  CHECK(a.dense_slot(0) == b.dense_slot(0));
  CHECK(a.dense_slot(1) == b.dense_slot(1));
  CHECK(a.version() == b.version());
  CHECK(a.optimizer_steps() == b.optimizer_steps());
  CHECK(a.applied(0) == b.applied(0));
  CHECK(encode_table(a.tables()[0]) == encode_table(b.tables()[0]));
}

struct chain {
  std::vector<shard_snapshot_msg> links;
  chain_reader reader() const {
    return [this](size_t i) { return decode(links.at(i)); };
  }
};

// A base at checkpoint 1, then deltas 2 and 3, of `s` trained in between.
chain three_links(shard_core& s, const std::vector<uint64_t>& k) {
  chain c;
  push_at(s, 1, 0, {k[0], k[1]});
  auto base = snapshot_of(s, 1, 0);
  REQUIRE(base);
  c.links.push_back(*base);
  s.clear_changes();
  push_at(s, 2, shard_core::dense_chunk_floats + 5, {k[1], k[2]});  // chunk 1 only
  auto d2 = delta_snapshot_of(s, 2, 0, {}, {"ckpt-1.shard-1.snap", 1, 1});
  REQUIRE_MESSAGE(d2, describe(d2.error()));
  c.links.push_back(*d2);
  s.clear_changes();
  push_at(s, 3, 2 * shard_core::dense_chunk_floats + 90, {k[3]});  // the short last chunk
  auto d3 = delta_snapshot_of(s, 3, 0, {}, {"ckpt-2.shard-1.snap", 2, 1});
  REQUIRE(d3);
  c.links.push_back(*d3);
  s.clear_changes();
  return c;
}

}  // namespace

TEST_CASE("a base and its deltas restore the shard they were taken from, which continues bit-identically") {
  const auto cfg = delta_config();
  auto a = fresh_delta_shard(cfg);
  auto k = keys_of_shard(1, 5);
  auto c = three_links(a, k);
  auto b = restore_chain(cfg, c.links.size(), c.reader(), verify_mode::checksums, init_rows);
  REQUIRE_MESSAGE(b, describe(b.error()));
  same_shard(a, *b);
  push_at(a, 4, 7, {k[0], k[4]});
  push_at(*b, 4, 7, {k[0], k[4]});
  same_shard(a, *b);
  // A chain cut short is the shard as of its last link.
  auto at2 = restore_chain(cfg, 2, c.reader(), verify_mode::checksums, init_rows);
  REQUIRE(at2);
  CHECK(at2->version() == 2);
  CHECK(pull_rows(*at2, {k[3]}) != pull_rows(a, {k[3]}));
}

TEST_CASE("a delta holds the dense chunks and the rows that changed, not the shard") {
  const auto cfg = delta_config();
  auto a = fresh_delta_shard(cfg);
  auto c = three_links(a, keys_of_shard(1, 5));
  auto d2 = decode(c.links[1]);
  REQUIRE(d2);
  CHECK(std::string(d2->root().getParentFile().cStr()) == "ckpt-1.shard-1.snap");
  CHECK(d2->root().getBaseCheckpoint() == 1);
  for (auto t : d2->root().getTensors()) {
    std::string name = t.getName().cStr();
    CAPTURE(name);
    if (name == "dense.chunks")
      CHECK(shape_of(t) == std::vector<uint64_t>{1});
    if (name == "dense" || name == "dense.slot1" || name == "dense.slot2")
      CHECK(shape_of(t) == std::vector<uint64_t>{shard_core::dense_chunk_floats});
  }
  // One chunk of a base's two and a bit (values and two state slots).
  CHECK(c.links[1].frame()->size_words() * 10 < c.links[0].frame()->size_words() * 6);
}

TEST_CASE("a delta alone, a chain out of order or a delta on another parent is refused by name") {
  const auto cfg = delta_config();
  auto a = fresh_delta_shard(cfg);
  auto k = keys_of_shard(1, 5);
  auto c = three_links(a, k);
  SUBCASE("a delta restored as a whole snapshot") {
    auto d = decode(c.links[1]);
    REQUIRE(d);
    auto r = restore_shard(cfg, d->root(), verify_mode::checksums, init_rows);
    REQUIRE_FALSE(r);
    CHECK(describe(r.error()).find("is a delta on ckpt-1.shard-1.snap") != std::string::npos);
  }
  SUBCASE("a link skipped") {
    chain skipping{{c.links[0], c.links[2]}};
    auto r = restore_chain(cfg, 2, skipping.reader(), verify_mode::checksums, init_rows);
    REQUIRE_FALSE(r);
    CHECK(is(r.error(), errc::damaged_snapshot));
    CHECK(describe(r.error()).find("not a delta on checkpoint 1") != std::string::npos);
  }
  SUBCASE("the delta of another shard's history") {
    auto other = fresh_delta_shard(cfg);
    push_at(other, 1, 0, {k[0], k[3], k[4]});
    auto base = snapshot_of(other, 1, 0);
    REQUIRE(base);
    chain mixed{{*base, c.links[1]}};
    auto r = restore_chain(cfg, 2, mixed.reader(), verify_mode::checksums, init_rows);
    REQUIRE_FALSE(r);
    CHECK(is(r.error(), errc::damaged_snapshot));
    CHECK(describe(r.error()).find("a delta of another parent") != std::string::npos);
  }
}

TEST_CASE("a base and a delta streamed into their files restore the shard, and hold what the ones in memory hold") {
  namespace fs = std::filesystem;
  struct scratch_dir {
    fs::path path = fs::temp_directory_path() / ("keel-stream-test-" + std::to_string(std::random_device{}()));
    scratch_dir() { fs::create_directories(path); }
    ~scratch_dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } dir;
  const auto cfg = delta_config();
  auto a = fresh_delta_shard(cfg);
  auto k = keys_of_shard(1, 5);
  push_at(a, 1, 0, {k[0], k[1]});
  auto in_memory = snapshot_of(a, 1, 0);
  REQUIRE(in_memory);
  auto base = stream_snapshot_of(a, *posix_io(), dir.path, "ckpt-1.shard-1.snap", "t", 1, 0, {}, std::nullopt);
  REQUIRE_MESSAGE(base, describe(base.error()));
  REQUIRE(commit_streamed(*posix_io(), std::move(*base)));
  a.clear_changes();
  push_at(a, 2, shard_core::dense_chunk_floats + 5, {k[1], k[2]});
  CHECK(snapshot_bytes_estimate(a, true) < snapshot_bytes_estimate(a, false));
  auto delta = stream_snapshot_of(a, *posix_io(), dir.path, "ckpt-2.shard-1.snap", "t", 2, 0, {},
                                  delta_parent{"ckpt-1.shard-1.snap", 1, 1});
  REQUIRE_MESSAGE(delta, describe(delta.error()));
  REQUIRE(commit_streamed(*posix_io(), std::move(*delta)));
  a.clear_changes();

  auto pool = buffer_pool::create(SIZE_MAX, 1);
  const std::vector<std::string> files = {"ckpt-1.shard-1.snap", "ckpt-2.shard-1.snap"};
  chain_reader read = [&](size_t i) { return read_snapshot_file(*posix_io(), dir.path / files.at(i), *pool); };
  auto b = restore_chain(cfg, 2, read, verify_mode::checksums, init_rows);
  REQUIRE_MESSAGE(b, describe(b.error()));
  same_shard(a, *b);
  // The streamed base holds the tensors, CRCs and all, of the one in memory.
  auto file = read(0);
  REQUIRE(file);
  auto mem = decode(*in_memory);
  REQUIRE(mem);
  REQUIRE(file->root().getTensors().size() == mem->root().getTensors().size());
  for (unsigned i = 0; i < mem->root().getTensors().size(); ++i) {
    CHECK(std::string(file->root().getTensors()[i].getName().cStr()) ==
          std::string(mem->root().getTensors()[i].getName().cStr()));
    CHECK(file->root().getTensors()[i].getCrc32c() == mem->root().getTensors()[i].getCrc32c());
  }
}
