// Chains of incremental snapshots in the store: a delta entry's chain is
// validated file by file, in order, at commit (present, of its shard,
// ascending) and at load (every CRC, the very file recorded, each file's
// parent the one before it); a damaged or misplaced file of a chain makes
// every checkpoint whose chain holds it invalid, named, and latest_verified
// falls back to one whose chain does not; retention keeps every file a kept
// manifest names, whichever checkpoint wrote it.
#include <doctest/doctest.h>

#include "storage/faulty_io.hpp"
#include "storage/file_damage.hpp"
#include "storage/store_inspection.hpp"
#include "storage/store_layout.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::unique_ptr<snapshot_store> open_store(const fs::path& dir, size_t keep_last = 10) {
  store_options opts;
  opts.keep_last = keep_last;
  auto store = snapshot_store::open(dir, opts);
  REQUIRE_MESSAGE(store, describe(store.error()));
  return std::move(*store);
}

snapshot_ref ref_of(const snapshot_store& store, uint64_t id, uint32_t shard) {
  auto m = store.manifest(id);
  REQUIRE_MESSAGE(m, describe(m.error()));
  return refs_of(store.dir(), *m).at(shard);
}

}  // namespace

TEST_CASE("a chain reads back file by file: base first, each delta on the one before, the entry's own file last") {
  temp_dir dir;
  auto store = open_store(dir.path());
  chain_writer w{*store};
  w.commit(1, true);
  w.commit(2, false);
  w.commit(3, false);
  auto ref = ref_of(*store, 3, 1);
  REQUIRE(ref.entry.chain.size() == 2);
  CHECK(ref.entry.chain[0].file == snapshot_name(1, 1));
  CHECK(ref.entry.chain[1].file == snapshot_name(2, 1));
  auto pool = buffer_pool::create();
  for (size_t i = 0; i <= 2; ++i) {
    auto link = read_chain_link(*posix_io(), ref, i, *pool);
    REQUIRE_MESSAGE(link, describe(link.error()));
    check_sample(*link, i + 1, 1);
    CHECK(link->root().getBaseCheckpoint() == 1);
  }
  auto past = read_chain_link(*posix_io(), ref, 3, *pool);
  REQUIRE(!past);
  CHECK(is(past.error(), errc::invalid_argument));
  // A delta is not a whole snapshot: read_snapshot_ref refuses it, naming it.
  auto whole = read_snapshot_ref(*posix_io(), ref, *pool);
  REQUIRE(!whole);
  CHECK(is(whole.error(), errc::invalid_argument));
  CHECK_MESSAGE(contains(describe(whole.error()), snapshot_name(3, 1) + ": a delta"), describe(whole.error()));
  auto base = read_snapshot_ref(*posix_io(), ref_of(*store, 1, 1), *pool);
  REQUIRE_MESSAGE(base, describe(base.error()));
  check_sample(*base, 1, 1);
  // load validates every chain and holds each entry's own file.
  auto loaded = store->load(3);
  REQUIRE_MESSAGE(loaded, describe(loaded.error()));
  check_sample(*loaded->shard(0), 3, 0);
  auto verified = store->latest_verified();
  REQUIRE_MESSAGE(verified, describe(verified.error()));
  CHECK(verified->manifest.checkpoint == 3);
  CHECK(verified->skipped.empty());
}

TEST_CASE("a file whose place in the chain is not the manifest's is refused, naming it and both parents") {
  temp_dir dir;
  auto store = open_store(dir.path());
  chain_writer w{*store};
  w.commit(1, true);
  w.commit(2, false);
  auto pool = buffer_pool::create();
  SUBCASE("a delta on another file of its parent's checkpoint (a shard that wrote checkpoint 2 again)") {
    auto again = snapshot_name(2, 1, 0xabcdef);
    auto other = write_snapshot_file(*posix_io(), dir.path(), again, w.snapshot(2, 1, false), "t");
    REQUIRE(other);
    // Shard 1's delta of checkpoint 3 applies on its second file of checkpoint 2,
    // but the manifest records the chain through the first.
    chain_writer w3 = w;
    w3.chains[1].back() = {2, again, other->bytes, other->crc32c};
    auto delta = store->write_snapshot(w3.snapshot(3, 1, false));
    REQUIRE(delta);
    auto e1 = w.entry(*delta, false);
    auto e0 = store->write_snapshot(w.snapshot(3, 0, false));
    REQUIRE(e0);
    auto committed = store->commit({3, 30, 0, {w.entry(*e0, false), e1}, {}});
    REQUIRE_MESSAGE(committed, describe(committed.error()));
    auto ref = ref_of(*store, 3, 1);
    auto link = read_chain_link(*posix_io(), ref, 2, *pool);
    REQUIRE(!link);
    CHECK(is(link.error(), errc::damaged_snapshot));
    auto why = describe(link.error());
    CHECK_MESSAGE(contains(why, snapshot_name(3, 1) + ": a delta on " + again + ", but the chain says " +
                                  snapshot_name(2, 1)),
                  why);
    auto latest = store->latest_verified();
    REQUIRE_MESSAGE(latest, describe(latest.error()));
    CHECK(latest->manifest.checkpoint == 2);
    REQUIRE(latest->skipped.size() == 1);
    CHECK(latest->skipped[0].file == snapshot_name(3, 1));
  }
  SUBCASE("a base where the chain says a delta, and a delta where it says a base") {
    auto ref = ref_of(*store, 2, 0);
    ref.entry.chain.clear();  // the manifest would say file 2 is a base
    auto as_base = read_chain_link(*posix_io(), ref, 0, *pool);
    REQUIRE(!as_base);
    CHECK_MESSAGE(contains(describe(as_base.error()), snapshot_name(2, 0) + ": a delta on " + snapshot_name(1, 0) +
                                                        ", but the chain says it is a base"),
                  describe(as_base.error()));
    auto outside = ref_of(*store, 2, 0);
    outside.entry.chain[0].file = "../" + snapshot_name(1, 0);
    auto escaped = read_chain_link(*posix_io(), outside, 0, *pool);
    REQUIRE(!escaped);
    CHECK_MESSAGE(contains(describe(escaped.error()), "not a snapshot file of that shard and checkpoint"),
                  describe(escaped.error()));
    auto ref2 = ref_of(*store, 2, 0);
    ref2.entry.chain.insert(ref2.entry.chain.begin(), ref2.entry.chain[0]);  // base, base, delta
    ref2.entry.chain[1].checkpoint = 1;
    auto as_delta = read_chain_link(*posix_io(), ref2, 1, *pool);
    REQUIRE(!as_delta);
    CHECK_MESSAGE(contains(describe(as_delta.error()), snapshot_name(1, 0) + ": a base, but the chain says it is a delta"),
                  describe(as_delta.error()));
  }
}

namespace {

// Two chains: 1 base, 2 and 3 deltas; 4 base, 5 and 6 deltas. `damage`
// then applies to shard 1's file of checkpoint `victim`; every checkpoint
// from it to the end of its chain must be skipped, naming that file.
void check_chain_damage(uint64_t victim, const std::function<caf::error(const fs::path&, uint64_t)>& damage,
                        const std::string& reason) {
  CAPTURE(victim);
  CAPTURE(reason);
  temp_dir dir;
  auto store = open_store(dir.path());
  chain_writer w{*store};
  for (uint64_t id = 1; id <= 6; ++id)
    w.commit(id, id == 1 || id == 4);
  auto file = snapshot_name(victim, 1);
  REQUIRE(!damage(dir / file, fs::file_size(dir / file)));
  auto latest = store->latest_verified();
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  uint64_t end = victim <= 3 ? 3 : 6;
  CHECK(latest->manifest.checkpoint == (victim >= 4 ? victim - 1 : 6));
  REQUIRE(latest->skipped.size() == 6 - latest->manifest.checkpoint);
  for (auto& d : latest->skipped) {
    CHECK(d.file == file);
    CHECK_MESSAGE(contains(describe(d.reason), file + ": "), describe(d.reason));
    CHECK_MESSAGE(contains(describe(d.reason), reason), describe(d.reason));
  }
  auto valid = store->latest_valid();
  REQUIRE(valid);
  CHECK(valid->checkpoint.manifest.checkpoint == latest->manifest.checkpoint);
  // Checkpoints of the other chain still load.
  for (uint64_t id = 1; id <= 6; ++id) {
    bool holds = id >= victim && id <= end;
    CHECK_MESSAGE(bool(store->load(id)) == !holds, id);
  }
}

}  // namespace

TEST_CASE("a torn, bit-flipped or missing base or middle delta invalidates the checkpoints on it, named") {
  for (uint64_t victim : {4u, 5u, 2u}) {
    check_chain_damage(victim, [](const fs::path& p, uint64_t size) { return truncate_file(p, size / 2); },
                       "length mismatch");
    check_chain_damage(victim, [](const fs::path& p, uint64_t size) { return flip_bit(p, size - 100, 2); },
                       "CRC32C mismatch");
    check_chain_damage(victim, [](const fs::path& p, uint64_t size) { return zero_range(p, size / 3, 512); },
                       "CRC32C mismatch");
    check_chain_damage(
      victim, [](const fs::path& p, uint64_t) { return fs::remove(p) ? caf::error{} : make_error(errc::io_error, "rm"); },
      "missing, but ckpt-");
  }
}

TEST_CASE("a chain file replaced by another checkpoint's file of the shard is not the file committed") {
  temp_dir dir;
  auto store = open_store(dir.path());
  chain_writer w{*store};
  for (uint64_t id = 1; id <= 3; ++id)
    w.commit(id, id == 1);
  fs::copy_file(dir / snapshot_name(1, 1), dir / snapshot_name(2, 1), fs::copy_options::overwrite_existing);
  auto latest = store->latest_verified();
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  CHECK(latest->manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 2);
  CHECK(latest->skipped[0].file == snapshot_name(2, 1));
  CHECK_MESSAGE(contains(describe(latest->skipped[0].reason), snapshot_name(2, 1) + ": is not the file"),
                describe(latest->skipped[0].reason));
}

TEST_CASE("commit refuses a chain that names a missing, foreign, newer or unordered file, naming it") {
  temp_dir dir;
  auto store = open_store(dir.path());
  chain_writer w{*store};
  w.commit(1, true);
  w.commit(2, false);
  auto attempt = [&](const std::function<void(manifest_entry&)>& spoil) {
    auto e0 = store->write_snapshot(w.snapshot(3, 0, false));
    auto e1 = store->write_snapshot(w.snapshot(3, 1, false));
    REQUIRE(e0);
    REQUIRE(e1);
    auto bad = w.entry(*e1, false);
    spoil(bad);
    auto r = store->commit({3, 30, 0, {w.entry(*e0, false), bad}, {}});
    REQUIRE(!r);
    CHECK(is(r.error(), errc::invalid_argument));
    CHECK(!fs::exists(dir / manifest_name(3)));
    return describe(r.error());
  };
  auto missing = [&] {
    fs::rename(dir / snapshot_name(1, 1), dir / "aside");
    auto why = attempt([](manifest_entry&) {});
    fs::rename(dir / "aside", dir / snapshot_name(1, 1));
    return why;
  }();
  CHECK_MESSAGE(contains(missing, "shard 1's chain, file 0 ('" + snapshot_name(1, 1) + "')"), missing);
  auto foreign = attempt([](manifest_entry& e) { e.chain[0].file = snapshot_name(1, 0); });
  CHECK_MESSAGE(contains(foreign, "not a snapshot file of shard 1"), foreign);
  auto newer = attempt([](manifest_entry& e) {
    e.chain[1] = {3, snapshot_name(3, 1), e.bytes, e.crc32c};
  });
  CHECK_MESSAGE(contains(newer, "not older than the entry's (3)"), newer);
  auto unordered = attempt([](manifest_entry& e) { std::swap(e.chain[0], e.chain[1]); });
  CHECK_MESSAGE(contains(unordered, "a chain ascends"), unordered);
  auto wrong_id = attempt([](manifest_entry& e) { e.chain[0].checkpoint = 2; });
  CHECK_MESSAGE(contains(wrong_id, "a file of checkpoint 1, the link says checkpoint 2"), wrong_id);
  auto short_file = attempt([](manifest_entry& e) { e.chain[1].bytes += 1; });
  CHECK_MESSAGE(contains(short_file, "the entry says"), short_file);
  // With the chain as recorded, the commit goes through.
  w.commit(3, false);
}

TEST_CASE("retention keeps every file a kept manifest's chain names, and drops an old base once none does") {
  temp_dir dir;
  auto store = open_store(dir.path(), 2);
  chain_writer w{*store};
  for (uint64_t id = 1; id <= 4; ++id)
    w.commit(id, id == 1);
  // Manifests 1 and 2 are gone; their files stay, as 3's and 4's chains name them.
  CHECK(!fs::exists(dir / manifest_name(1)));
  CHECK(!fs::exists(dir / manifest_name(2)));
  for (uint64_t id = 1; id <= 4; ++id)
    for (uint32_t s = 0; s < 2; ++s)
      CHECK_MESSAGE(fs::exists(dir / snapshot_name(id, s)), id);
  CHECK(store->load(4));
  // Opening the store again (its recovery sweep) keeps them too.
  auto chains = w.chains;
  store.reset();
  store = open_store(dir.path(), 2);
  chain_writer again{*store, 2, chains};
  CHECK(fs::exists(dir / snapshot_name(1, 0)));
  CHECK(store->latest_verified());
  // A new base: 4's manifest (and with it the old chain) is still kept.
  again.commit(5, true);
  CHECK(fs::exists(dir / snapshot_name(1, 0)));
  CHECK(store->load(4));
  // A delta on it: now no kept manifest names the old chain, which goes.
  auto r = again.commit(6, false);
  CHECK(!r.retention_problem);
  for (uint64_t id = 1; id <= 4; ++id)
    CHECK_MESSAGE(!fs::exists(dir / snapshot_name(id, 1)), id);
  CHECK(fs::exists(dir / snapshot_name(5, 1)));
  CHECK(store->load(6));
}

TEST_CASE("a kept manifest that cannot be read keeps every snapshot file, and says so") {
  temp_dir dir;
  auto store = open_store(dir.path(), 2);
  chain_writer w{*store};
  for (uint64_t id = 1; id <= 3; ++id)
    w.commit(id, true);
  REQUIRE(!flip_bit(dir / manifest_name(3), fs::file_size(dir / manifest_name(3)) - 5));
  auto r = w.commit(4, true);
  // Manifest 2 dropped, 3 kept but unreadable: 2's files might be what it names.
  CHECK(!fs::exists(dir / manifest_name(2)));
  CHECK(fs::exists(dir / snapshot_name(2, 0)));
  REQUIRE(r.retention_problem);
  CHECK_MESSAGE(contains(describe(r.retention_problem), manifest_name(3)), describe(r.retention_problem));
  // The store still opens, and still keeps them.
  store.reset();
  store = open_store(dir.path(), 2);
  CHECK(fs::exists(dir / snapshot_name(2, 0)));
  auto latest = store->latest_verified();
  REQUIRE(latest);
  CHECK(latest->manifest.checkpoint == 4);
}

TEST_CASE("abandon leaves a file a newer chain names, and discard_after an older chain") {
  temp_dir dir;
  auto store = open_store(dir.path());
  chain_writer w{*store};
  w.commit(1, true);
  SUBCASE("abandon") {
    // Checkpoint 2 never committed (say, another shard failed), yet the
    // shards chained on their files of it and checkpoint 3 committed.
    checkpoint_manifest two{2, 20, 0, {}, {}};
    for (uint32_t s = 0; s < 2; ++s) {
      auto e = store->write_snapshot(w.snapshot(2, s, false));
      REQUIRE(e);
      two.shards.push_back(w.entry(*e, false));
    }
    w.committed(two);
    w.commit(3, false);
    CHECK(!store->abandon(2));
    CHECK(fs::exists(dir / snapshot_name(2, 0)));
    CHECK(store->load(3));
    // A file of an uncommitted checkpoint nothing names still goes.
    REQUIRE(store->write_snapshot(sample_snapshot(4, 0)));
    CHECK(!store->abandon(4));
    CHECK(!fs::exists(dir / snapshot_name(4, 0)));
  }
  SUBCASE("discard_after") {
    for (uint64_t id = 2; id <= 4; ++id)
      w.commit(id, false);
    auto removed = store->discard_after(2);
    REQUIRE(removed);
    CHECK(*removed == std::vector<uint64_t>{3, 4});
    CHECK(!fs::exists(dir / snapshot_name(3, 0)));
    CHECK(fs::exists(dir / snapshot_name(1, 0)));
    CHECK(store->load(2));
  }
}

TEST_CASE("inspect_store tells bases from deltas, lists a delta's chain, and names a damaged chain file") {
  temp_dir dir;
  auto store = open_store(dir.path(), 2);
  chain_writer w{*store};
  for (uint64_t id = 1; id <= 3; ++id)
    w.commit(id, id == 1);
  auto pool = buffer_pool::create();
  auto clean = inspect_store(dir.path(), verify_mode::checksums, *posix_io(), *pool);
  REQUIRE(clean);
  REQUIRE(clean->checkpoints.size() == 2);  // manifest 1 dropped; its files kept for the chain
  CHECK(clean->leftovers.empty());
  CHECK(clean->damaged() == 0);
  auto& s = clean->checkpoints[0].shards.at(1);
  CHECK(s.delta());
  CHECK(s.base_checkpoint == 1);
  REQUIRE(s.chain.size() == 2);
  CHECK(s.chain[0].file == snapshot_name(1, 1));
  CHECK(s.chain[1].file == snapshot_name(2, 1));
  CHECK(s.chain_bytes() == s.file_bytes + s.chain[0].bytes + s.chain[1].bytes);
  CHECK(s.tensors.size() == 2);
  REQUIRE(!flip_bit(dir / snapshot_name(2, 1), fs::file_size(dir / snapshot_name(2, 1)) - 64));
  auto quick = inspect_store(dir.path(), verify_mode::structure, *posix_io(), *pool);
  REQUIRE(quick);
  CHECK(quick->damaged() == 0);  // a flipped tensor byte needs --verify
  auto verified = inspect_store(dir.path(), verify_mode::checksums, *posix_io(), *pool);
  REQUIRE(verified);
  CHECK(verified->damaged() == 2);
  auto& three = verified->checkpoints[0];
  REQUIRE(three.damage.size() == 1);
  CHECK(three.damage[0].file == snapshot_name(2, 1));
  CHECK(three.shards.at(1).chain[1].damaged);
  CHECK(!three.shards.at(1).chain[0].damaged);
  // A file no manifest names any more is a leftover; one a chain names is not.
  REQUIRE(store->write_snapshot(sample_snapshot(7, 0)));
  auto later = inspect_store(dir.path(), verify_mode::structure, *posix_io(), *pool);
  REQUIRE(later);
  CHECK(later->leftovers == std::vector<std::string>{snapshot_name(7, 0)});
}

TEST_CASE("a kept manifest that cannot be read for EIO keeps every snapshot file, and the store still opens") {
  temp_dir dir;
  auto io = faulty_io::wrap();
  store_options opts;
  opts.keep_last = 2;
  opts.io = io;
  auto store = snapshot_store::open(dir.path(), opts);
  REQUIRE(store);
  chain_writer w{**store};
  for (uint64_t id = 1; id <= 3; ++id)
    w.commit(id, true);
  // From here every read fails: the commit's retention cannot tell what
  // manifests 3 and 4 name, so 2's files, whose manifest goes, stay.
  io->arm(io_fault{io_op::read, 1, 5, 1000});
  auto r = w.commit(4, true);
  CHECK(!fs::exists(dir / manifest_name(2)));
  REQUIRE(r.retention_problem);
  CHECK_MESSAGE(contains(describe(r.retention_problem), "keeping every snapshot file, as " + manifest_name(3)),
                describe(r.retention_problem));
  CHECK(fs::exists(dir / snapshot_name(2, 0)));
  store->reset();
  auto again = snapshot_store::open(dir.path(), opts);
  REQUIRE_MESSAGE(again, describe(again.error()));
  CHECK(fs::exists(dir / snapshot_name(2, 0)));
  again->reset();
  // Readable again: the next sweep removes what no kept manifest names.
  io->disarm();
  auto reopened = snapshot_store::open(dir.path(), opts);
  REQUIRE(reopened);
  CHECK(!fs::exists(dir / snapshot_name(2, 0)));
  CHECK(fs::exists(dir / snapshot_name(3, 0)));
  CHECK((*reopened)->load(4));
}
