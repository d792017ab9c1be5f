#include <fstream>

#include <doctest/doctest.h>

#include "storage/store_layout.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::unique_ptr<snapshot_store> open_store(const fs::path& dir, size_t keep_last = 3) {
  store_options opts;
  opts.keep_last = keep_last;
  auto s = snapshot_store::open(dir, opts);
  REQUIRE_MESSAGE(s, describe(s.error()));
  return std::move(*s);
}

}  // namespace

TEST_CASE("a checkpoint round-trips: every shard's snapshot comes back as written") {
  temp_dir dir;
  auto store = open_store(dir.path());
  commit_sample(*store, 1, 3);
  auto loaded = store->load(1);
  REQUIRE_MESSAGE(loaded, describe(loaded.error()));
  CHECK(loaded->manifest.checkpoint == 1);
  CHECK(loaded->manifest.step == 10);
  CHECK(loaded->manifest.created_unix_ms == 1700000000001);
  REQUIRE(loaded->snapshots.size() == 3);
  for (uint32_t s = 0; s < 3; ++s) {
    REQUIRE(loaded->shard(s) != nullptr);
    check_sample(*loaded->shard(s), 1, s);
  }
  CHECK(loaded->shard(3) == nullptr);
  auto one = store->read_snapshot(1, 2);
  REQUIRE_MESSAGE(one, describe(one.error()));
  check_sample(*one, 1, 2);
  CHECK(files_in(dir.path()) ==
        std::vector<std::string>{manifest_name(1), snapshot_name(1, 0), snapshot_name(1, 1),
                                 snapshot_name(1, 2)});
}

TEST_CASE("snapshots written one by one become a checkpoint only when the manifest is committed") {
  temp_dir dir;
  auto store = open_store(dir.path());
  checkpoint_manifest m{7, 70, 1, {}, {}};
  for (uint32_t s = 0; s < 2; ++s) {
    auto e = store->write_snapshot(sample_snapshot(7, s));
    REQUIRE_MESSAGE(e, describe(e.error()));
    m.shards.push_back(*e);
  }
  CHECK(store->committed()->empty());
  CHECK(is(store->latest_valid().error(), errc::not_found));
  auto r = store->commit(m);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(*store->committed() == std::vector<uint64_t>{7});
  auto latest = store->latest_valid();
  REQUIRE(latest);
  CHECK(latest->checkpoint.manifest.checkpoint == 7);
  CHECK(latest->skipped.empty());
}

TEST_CASE("a store refuses checkpoint ids that are not newer than the newest committed one") {
  temp_dir dir;
  auto store = open_store(dir.path());
  commit_sample(*store, 5);
  auto old = store->write_snapshot(sample_snapshot(5, 0));
  REQUIRE(!old);
  CHECK(is(old.error(), errc::invalid_argument));
  auto older = store->write_checkpoint(3, 30, 0, sample_checkpoint(3));
  REQUIRE(!older);
  CHECK(contains(describe(older.error()), "not newer"));
  auto entry = store->write_snapshot(sample_snapshot(6, 0));
  REQUIRE(entry);
  entry->bytes += 1;
  auto bad = store->commit({6, 60, 0, {*entry}, {}});
  REQUIRE(!bad);
  CHECK(contains(describe(bad.error()), "bytes"));
  CHECK(*store->committed() == std::vector<uint64_t>{5});
}

TEST_CASE("after a rollback, checkpoints newer than the one restored are discarded and their ids reusable") {
  temp_dir dir;
  auto store = open_store(dir.path(), 5);
  for (uint64_t id = 1; id <= 4; ++id)
    commit_sample(*store, id, 2);
  auto stray = store->write_snapshot(sample_snapshot(5, 0));  // written, never committed
  REQUIRE(stray);
  auto removed = store->discard_after(2);
  REQUIRE_MESSAGE(removed, describe(removed.error()));
  CHECK(*removed == std::vector<uint64_t>{3, 4});
  CHECK(*store->committed() == std::vector<uint64_t>{1, 2});
  for (auto& entry : fs::directory_iterator(dir.path())) {
    auto f = parse_store_file_name(entry.path().filename().string());
    REQUIRE(f);
    CHECK(f->checkpoint <= 2);
  }
  commit_sample(*store, 3, 2);  // the run writes id 3 again
  CHECK(*store->committed() == std::vector<uint64_t>{1, 2, 3});
  auto all = store->discard_after(0);
  REQUIRE(all);
  CHECK(*all == std::vector<uint64_t>{1, 2, 3});
  CHECK(store->committed()->empty());
}

TEST_CASE("retention keeps exactly the newest K checkpoints and removes their files") {
  for (size_t k : {1, 2, 3}) {
    CAPTURE(k);
    temp_dir dir;
    auto store = open_store(dir.path(), k);
    for (uint64_t id = 1; id <= 6; ++id) {
      commit_sample(*store, id);
      auto ids = store->committed();
      REQUIRE(ids);
      CHECK(ids->size() == std::min<size_t>(id, k));
      CHECK(ids->back() == id);
    }
    std::vector<std::string> expected;
    for (uint64_t id = 7 - k; id <= 6; ++id) {
      expected.push_back(manifest_name(id));
      expected.push_back(snapshot_name(id, 0));
      expected.push_back(snapshot_name(id, 1));
    }
    std::sort(expected.begin(), expected.end());
    CHECK(files_in(dir.path()) == expected);
    for (uint64_t id = 7 - k; id <= 6; ++id)
      CHECK(store->load(id));
  }
}

TEST_CASE("opening a store removes temporary files, uncommitted snapshots and checkpoints beyond K") {
  temp_dir dir;
  {
    auto store = open_store(dir.path(), 5);
    for (uint64_t id = 1; id <= 4; ++id)
      commit_sample(*store, id);
    REQUIRE(store->write_snapshot(sample_snapshot(5, 0)));  // never committed
  }
  // What a crashed writer leaves behind, plus a file that is not the store's.
  std::ofstream(dir / (snapshot_name(5, 1) + ".tmp-123-9")) << "partial";
  std::ofstream(dir / (manifest_name(5) + ".tmp-123-10")) << "partial";
  std::ofstream(dir / "README") << "not mine";
  auto store = open_store(dir.path(), 2);
  CHECK(*store->committed() == std::vector<uint64_t>{3, 4});
  auto names = files_in(dir.path());
  std::vector<std::string> expected = {"README",
                                       manifest_name(3),
                                       manifest_name(4),
                                       snapshot_name(3, 0),
                                       snapshot_name(3, 1),
                                       snapshot_name(4, 0),
                                       snapshot_name(4, 1)};
  std::sort(expected.begin(), expected.end());
  CHECK(names == expected);
  commit_sample(*store, 5);  // the id of the abandoned attempt is free again
  CHECK(store->load(5));
}

TEST_CASE("store file names parse back exactly and foreign names are not the store's") {
  auto m = parse_store_file_name(manifest_name(42));
  REQUIRE(m);
  CHECK(m->kind == store_file_kind::manifest);
  CHECK(m->checkpoint == 42);
  auto s = parse_store_file_name(snapshot_name(UINT64_MAX, UINT32_MAX));
  REQUIRE(s);
  CHECK(s->kind == store_file_kind::snapshot);
  CHECK(s->checkpoint == UINT64_MAX);
  CHECK(s->shard == UINT32_MAX);
  auto t = parse_store_file_name(snapshot_name(3, 1) + ".tmp-99-1");
  REQUIRE(t);
  CHECK(t->kind == store_file_kind::temporary);
  CHECK(t->checkpoint == 3);
  // A shard's own write carries a tag of 16 hex digits.
  auto tagged = snapshot_name(7, 2, 0x1f2e3d4c5b6a7988ull);
  CHECK(tagged == "ckpt-00000000000000000007.shard-2.1f2e3d4c5b6a7988.snap");
  auto g = parse_store_file_name(tagged);
  REQUIRE(g);
  CHECK(g->kind == store_file_kind::snapshot);
  CHECK(g->checkpoint == 7);
  CHECK(g->shard == 2);
  auto gt = parse_store_file_name(tagged + ".tmp-99-w1");
  REQUIRE(gt);
  CHECK(gt->kind == store_file_kind::temporary);
  for (std::string bad : {"README", "ckpt-1.manifest", "ckpt-00000000000000000001.shard-01.snap",
                          "ckpt-00000000000000000001.shard-.snap", "ckpt-00000000000000000001.snap",
                          "ckpt-99999999999999999999.manifest", "x.tmp-1",
                          "ckpt-00000000000000000001.shard-1.1f2e3d4c5b6a798.snap",     // 15 digits
                          "ckpt-00000000000000000001.shard-1.1F2E3D4C5B6A7988.snap",    // upper case
                          "ckpt-00000000000000000001.shard-1.1f2e3d4c5b6a798g.snap",    // not hex
                          "ckpt-00000000000000000001.shard-1..snap"})
    CHECK_MESSAGE(!parse_store_file_name(bad), bad);
}

TEST_CASE("a commit accepts shards' tagged files, refuses a file of another shard or checkpoint, and a ref reads the file back validated") {
  temp_dir dir;
  auto store = open_store(dir.path(), 3);
  auto io = posix_io();
  std::vector<manifest_entry> entries;
  for (uint32_t shard = 0; shard < 2; ++shard) {
    auto e = write_snapshot_file(*io, dir.path(), snapshot_name(1, shard, 0xabcdef0123456789ull + shard),
                                 sample_snapshot(1, shard), "test-1");
    REQUIRE_MESSAGE(e, describe(e.error()));
    entries.push_back(*e);
  }
  checkpoint_manifest wrong{1, 10, 0, {entries[1], entries[1]}, {}};
  wrong.shards[0].shard = 0;  // shard 0's entry names shard 1's file
  auto refused = store->commit(wrong);
  REQUIRE(!refused);
  CHECK_MESSAGE(describe(refused.error()).find("not a snapshot file of shard 0 in checkpoint 1") != std::string::npos,
                describe(refused.error()));
  auto done = store->commit({1, 10, 0, entries, {}});
  REQUIRE_MESSAGE(done, describe(done.error()));
  auto m = store->manifest(1);
  REQUIRE(m);
  auto refs = refs_of(dir.path(), *m);
  REQUIRE(refs.size() == 2);
  auto back = read_snapshot_ref(*io, refs[1], *buffer_pool::process_default());
  REQUIRE_MESSAGE(back, describe(back.error()));
  CHECK(back->root().getShard() == 1);
  auto other = refs[1];
  other.entry.crc32c ^= 1;  // not the file committed
  auto bad = read_snapshot_ref(*io, other, *buffer_pool::process_default());
  REQUIRE(!bad);
  CHECK(is(bad.error(), errc::damaged_snapshot));
  CHECK_MESSAGE(describe(bad.error()).find("is not the file ckpt-00000000000000000001.manifest committed") !=
                  std::string::npos,
                describe(bad.error()));
  auto latest = store->latest_verified();
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  CHECK(latest->manifest.checkpoint == 1);
  CHECK(latest->skipped.empty());
}

TEST_CASE("with shards writing their own files, opening the store leaves the files of checkpoints newer than the newest commit") {
  temp_dir dir;
  {
    auto store = open_store(dir.path(), 3);
    commit_sample(*store, 1);
  }
  auto io = posix_io();
  auto older = snapshot_name(1, 0, 0x1111111111111111ull);  // a stale rewrite of committed checkpoint 1
  auto newer = snapshot_name(2, 0, 0x2222222222222222ull);  // a shard's write of the next checkpoint
  for (auto& name : {older, newer})
    REQUIRE(write_snapshot_file(*io, dir.path(), name, sample_snapshot(name == older ? 1 : 2, 0), "t"));
  store_options shards_write;
  shards_write.shards_write = true;
  auto opened = snapshot_store::open(dir.path(), shards_write);
  REQUIRE(opened);
  CHECK(fs::exists(dir.path() / newer));
  CHECK(fs::exists(dir.path() / older));  // of a kept checkpoint: goes when checkpoint 1 does
  opened->reset();
  auto sole = snapshot_store::open(dir.path(), {});  // one writing process: nothing uncommitted survives
  REQUIRE(sole);
  CHECK(!fs::exists(dir.path() / newer));
}
