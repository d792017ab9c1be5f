// Failures injected through faulty_io while a checkpoint is written: every
// write, fsync, create and rename of the checkpoint in turn, with ENOSPC and
// with EIO. Invariant: the call fails with an error naming the cause, the
// previous checkpoint stays the latest valid one (also after reopening),
// and the store accepts the next checkpoint.
#include <cerrno>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "storage/faulty_io.hpp"
#include "storage/store_layout.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

struct faulty_store {
  temp_dir dir;
  std::shared_ptr<faulty_io> io = faulty_io::wrap();
  std::unique_ptr<snapshot_store> store;

  faulty_store() {
    store_options opts;
    opts.io = io;
    auto s = snapshot_store::open(dir.path(), opts);
    REQUIRE_MESSAGE(s, describe(s.error()));
    store = std::move(*s);
    commit_sample(*store, 1);
  }
};

// How many operations of kind `op` writing checkpoint 2 takes.
uint64_t ops_per_checkpoint(io_op op) {
  faulty_store fs;
  auto before = fs.io->counts().of(op);
  commit_sample(*fs.store, 2);
  return fs.io->counts().of(op) - before;
}

void check_previous_survives(const fs::path& dir) {
  auto reopened = snapshot_store::open(dir);
  REQUIRE_MESSAGE(reopened, describe(reopened.error()));
  auto latest = (*reopened)->latest_valid();
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  CHECK(latest->checkpoint.manifest.checkpoint == 1);
  CHECK(latest->skipped.empty());
  check_sample(*latest->checkpoint.shard(0), 1, 0);
  // Nothing of the failed checkpoint is left after reopening.
  for (auto& name : files_in(dir)) {
    auto f = parse_store_file_name(name);
    REQUIRE(f);
    CHECK_MESSAGE(f->checkpoint == 1, name);
  }
}

}  // namespace

TEST_CASE("ENOSPC or EIO at every write, fsync, create and rename of a checkpoint leaves the previous one the latest valid") {
  for (auto op : {io_op::write, io_op::fsync, io_op::create, io_op::rename}) {
    auto n = ops_per_checkpoint(op);
    REQUIRE(n >= 1);
    std::string op_name = to_string(op);
    MESSAGE(op_name << ": " << n << " per checkpoint of 2 shards");
    for (int error_number : {ENOSPC, EIO}) {
      for (uint64_t nth = 1; nth <= n; ++nth) {
        CAPTURE(op_name);
        CAPTURE(error_number);
        CAPTURE(nth);
        faulty_store fs;
        fs.io->arm(io_fault{op, nth, error_number});
        auto r = fs.store->write_checkpoint(2, 20, 0, sample_checkpoint(2));
        REQUIRE(!r);
        CHECK(fs.io->pending() == 0);
        auto text = describe(r.error());
        CHECK_MESSAGE(is(r.error(), errc::io_error), text);
        CHECK_MESSAGE(contains(text, "checkpoint 2 not committed"), text);
        CHECK_MESSAGE(contains(text, error_number == ENOSPC ? "(ENOSPC)" : "(EIO)"), text);
        CHECK_MESSAGE(contains(text, op_name), text);
        auto latest = fs.store->latest_valid();
        REQUIRE(latest);
        CHECK(latest->checkpoint.manifest.checkpoint == 1);
        check_previous_survives(fs.dir.path());
        // The same store goes on: the failed id may be retried.
        commit_sample(*fs.store, 2);
        CHECK(fs.store->load(2));
      }
    }
  }
}

TEST_CASE("a write torn inside the call fails the checkpoint and the previous one stays valid") {
  auto n = ops_per_checkpoint(io_op::write);
  for (uint64_t nth = 1; nth <= n; ++nth) {
    CAPTURE(nth);
    faulty_store fs;
    fs.io->arm(io_tear{nth, 5, false});
    auto r = fs.store->write_checkpoint(2, 20, 0, sample_checkpoint(2));
    REQUIRE(!r);
    CHECK(contains(describe(r.error()), "torn after 5 of"));
    check_previous_survives(fs.dir.path());
  }
}

TEST_CASE("a write torn by a device that reports success is caught when the checkpoint is read") {
  // The lying device tears each write of checkpoint 2 in turn, keeping its
  // head, its middle or all but its tail; the commit succeeds, the read
  // must not.
  auto n = ops_per_checkpoint(io_op::write);
  // How the tears came out: the test is about the third kind, so it must
  // have happened, and the first kind shows the commit's own check works.
  size_t refused_at_commit = 0, stored_whole = 0, skipped_at_read = 0;
  for (uint64_t nth = 1; nth <= n; ++nth) {
    for (uint64_t keep : {0, 4, 1000}) {
      CAPTURE(nth);
      CAPTURE(keep);
      faulty_store fs;
      fs.io->arm(io_tear{nth, keep, true});
      auto r = fs.store->write_checkpoint(2, 20, 0, sample_checkpoint(2));
      auto latest = fs.store->latest_valid();
      REQUIRE(latest);
      if (!r) {
        // A torn snapshot shorter than written is refused by the commit,
        // which checks each file's size against its entry.
        CHECK(contains(describe(r.error()), "bytes, the entry says"));
        CHECK(latest->checkpoint.manifest.checkpoint == 1);
        ++refused_at_commit;
        continue;
      }
      // A write shorter than `keep` stores whole: nothing was torn.
      if (latest->checkpoint.manifest.checkpoint == 2) {
        CHECK(latest->skipped.empty());
        CHECK(keep > 0);  // keeping nothing tears every write
        ++stored_whole;
        continue;
      }
      CHECK(latest->checkpoint.manifest.checkpoint == 1);
      REQUIRE(latest->skipped.size() == 1);
      auto reason = describe(latest->skipped[0].reason);
      CHECK_MESSAGE(is(latest->skipped[0].reason, errc::damaged_snapshot), reason);
      CHECK_MESSAGE(contains(reason, "ckpt-00000000000000000002."), reason);
      ++skipped_at_read;
    }
  }
  MESSAGE(refused_at_commit << " tears refused by the commit, " << stored_whole << " writes stored whole, "
                            << skipped_at_read << " torn checkpoints skipped when read");
  CHECK(skipped_at_read >= 1);
  CHECK(refused_at_commit >= 1);
}

TEST_CASE("an armed crash stores half of the next write, calls the crash, and later writes are whole again") {
  temp_dir dir;
  std::vector<std::string> crashes;
  auto io = faulty_io::wrap();
  auto file = io->create(dir.path() / "a.snap.tmp");
  REQUIRE(file);
  const std::string first = "0123456789", second = "abcdefgh";
  REQUIRE(!(*file)->write_at(0, first.data(), first.size()));  // unarmed: all of it
  io->arm(io_crash{1, [&](const std::filesystem::path& f, uint64_t stored, uint64_t size) {
                     crashes.push_back(f.filename().string() + " " + std::to_string(stored) + "/" + std::to_string(size));
                   }});
  CHECK(io->pending() == 1);
  auto err = (*file)->write_at(first.size(), second.data(), second.size());
  REQUIRE(err);
  CHECK(is(err, errc::io_error));
  CHECK_MESSAGE(describe(err).find("after 4 of 8 bytes") != std::string::npos, describe(err));
  CHECK(crashes == std::vector<std::string>{"a.snap.tmp 4/8"});
  CHECK(io->pending() == 0);
  REQUIRE(!(*file)->write_at(12, "XY", 2));  // it crashed once; the next write is whole
  CHECK(crashes.size() == 1);
  std::ifstream in(dir.path() / "a.snap.tmp", std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) == "0123456789abXY");
}
