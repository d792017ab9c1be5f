// A checkpoint directory others can write (the README puts it on a
// filesystem every node shares) never makes keel reach outside it: a link,
// a hard link, a FIFO or a device in place of one of keel's files is
// refused, not followed, opened or read, and a manifest whose record
// disagrees with its snapshots is damaged. The victim files live beside
// the directory, where keel must never write.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iterator>

#include <doctest/doctest.h>

#include "storage/directory_lock.hpp"
#include "storage/regular_file.hpp"
#include "storage/store_inspection.hpp"
#include "storage/store_layout.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs `read` (which may open `fifo`) and says whether it returned within
// 10 s. If it did not (it blocked in the FIFO's open), a writer opens and
// closes the FIFO so that it returns and the test fails instead of hanging.
template <class Read>
bool returns_without_blocking(const fs::path& fifo, Read read) {
  auto done = std::async(std::launch::async, read);
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::ready)
    return true;
  int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0)
    ::close(fd);
  done.wait();
  return false;
}

// The store's name of checkpoint `id`'s shard `shard` file.
fs::path snapshot_file(const fs::path& dir, uint64_t id, uint32_t shard) {
  return dir / snapshot_name(id, shard);
}

// Rewrites checkpoint `id`'s manifest through `change`, CRCs made right
// again: a manifest someone edited, not one damaged by a bit flip.
template <class Change>
void rewrite_manifest(const fs::path& dir, uint64_t id, Change change) {
  auto pool = buffer_pool::create(0, 0);
  auto m = read_manifest_file(*posix_io(), dir / manifest_name(id), *pool);
  REQUIRE_MESSAGE(m, describe(m.error()));
  change(*m);
  fs::remove(dir / manifest_name(id));
  auto err = write_manifest_file(*posix_io(), dir, manifest_name(id), *m, "edit");
  REQUIRE_MESSAGE(!err, describe(err));
}

}  // namespace

TEST_CASE("a symbolic link named keel.lock is refused, and the file it points to keeps its contents") {
  temp_dir outside;
  auto victim = outside / "victim";
  write_text(victim, "precious\n");
  fs::create_directory(outside / "ckpt");
  fs::create_symlink(victim, outside / "ckpt" / directory_lock_name);
  auto lock = directory_lock::acquire(outside / "ckpt");
  REQUIRE(!lock);
  CHECK_MESSAGE(has(describe(lock.error()), "not a regular file (it is a symbolic link"), describe(lock.error()));
  CHECK(contents(victim) == "precious\n");
  // A dangling link is not created through either.
  fs::remove(victim);
  CHECK(!directory_lock::acquire(outside / "ckpt"));
  CHECK(!fs::exists(victim));
}

TEST_CASE("a hard link named keel.lock is refused, and the file it names keeps its contents") {
  temp_dir outside;
  auto victim = outside / "victim";
  write_text(victim, "precious\n");
  fs::create_directory(outside / "ckpt");
  fs::create_hard_link(victim, outside / "ckpt" / directory_lock_name);
  auto lock = directory_lock::acquire(outside / "ckpt");
  REQUIRE(!lock);
  CHECK_MESSAGE(has(describe(lock.error()), "has 2 names"), describe(lock.error()));
  CHECK(contents(victim) == "precious\n");
}

TEST_CASE("a FIFO named keel.lock is refused without blocking") {
  temp_dir dir;
  REQUIRE(::mkfifo((dir / directory_lock_name).c_str(), 0644) == 0);
  caf::expected<directory_lock> lock{caf::error{}};
  REQUIRE(returns_without_blocking(dir / directory_lock_name,
                                   [&] { lock = directory_lock::acquire(dir.path()); }));
  REQUIRE(!lock);
  CHECK_MESSAGE(has(describe(lock.error()), "it is a FIFO"), describe(lock.error()));
}

TEST_CASE("a FIFO in place of a snapshot makes its checkpoint damaged, and reading the store never blocks on it") {
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  auto fifo = snapshot_file(dir.path(), 2, 1);
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);

  caf::expected<latest_checkpoint> latest{caf::error{}};
  REQUIRE(returns_without_blocking(fifo, [&] { latest = (*store)->latest_valid(); }));
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  CHECK(latest->checkpoint.manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 1);
  CHECK(latest->skipped[0].file == snapshot_name(2, 1));
  CHECK(is(latest->skipped[0].reason, errc::damaged_snapshot));
  CHECK_MESSAGE(has(describe(latest->skipped[0].reason), "not a regular file (it is a FIFO)"),
                describe(latest->skipped[0].reason));

  caf::expected<store_summary> summary{caf::error{}};
  REQUIRE(returns_without_blocking(fifo, [&] { summary = inspect_store(dir.path(), verify_mode::checksums); }));
  REQUIRE(summary);
  REQUIRE(summary->checkpoints.size() == 2);
  CHECK(!summary->checkpoints[0].valid());
  CHECK(summary->checkpoints[1].valid());
}

TEST_CASE("a symbolic link in place of a snapshot is damage: the store never reads through it") {
  temp_dir outside;
  fs::create_directory(outside / "ckpt");
  auto dir = outside / "ckpt";
  auto store = snapshot_store::open(dir);
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  // The very bytes committed, but elsewhere: only the link is wrong.
  auto file = snapshot_file(dir, 2, 0);
  fs::rename(file, outside / "elsewhere.snap");
  fs::create_symlink(outside / "elsewhere.snap", file);
  auto latest = (*store)->latest_valid();
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  CHECK(latest->checkpoint.manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 1);
  CHECK_MESSAGE(has(describe(latest->skipped[0].reason), "it is a symbolic link"),
                describe(latest->skipped[0].reason));
}

TEST_CASE("a manifest naming for a shard a file that is not the store's file of that shard and checkpoint is damaged") {
  // (A name with a '/' is refused by the manifest's schema already.) A
  // valid copy of the file under another name: only the name is wrong.
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
  fs::copy_file(snapshot_file(dir.path(), 2, 0), dir / "copy.snap");
  rewrite_manifest(dir.path(), 2, [](checkpoint_manifest& m) { m.shards[0].file = "copy.snap"; });
  auto latest = (*store)->latest_valid();
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  CHECK(latest->checkpoint.manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 1);
  CHECK_MESSAGE(has(describe(latest->skipped[0].reason),
                    "'copy.snap': " + manifest_name(2) + " names it as shard 0's file, of checkpoint 2, but it is not"),
                describe(latest->skipped[0].reason));
}

TEST_CASE("a manifest whose step disagrees with its snapshots' is damaged: the store falls back and inspect says so") {
  temp_dir dir;
  auto store = snapshot_store::open(dir.path());
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);  // its snapshots are at step 20, as its manifest says
  rewrite_manifest(dir.path(), 2, [](checkpoint_manifest& m) { m.step = 26; });

  auto latest = (*store)->latest_verified();
  REQUIRE_MESSAGE(latest, describe(latest.error()));
  CHECK(latest->manifest.checkpoint == 1);
  REQUIRE(latest->skipped.size() == 1);
  CHECK(latest->skipped[0].file == manifest_name(2));
  CHECK(is(latest->skipped[0].reason, errc::damaged_snapshot));
  CHECK_MESSAGE(has(describe(latest->skipped[0].reason),
                    "records step 26, but its snapshots were taken at step 20"),
                describe(latest->skipped[0].reason));
  CHECK(!(*store)->load(2));

  auto summary = inspect_store(dir.path(), verify_mode::structure);
  REQUIRE(summary);
  REQUIRE(summary->checkpoints.size() == 2);
  auto& newest = summary->checkpoints[0];
  CHECK(!newest.valid());
  REQUIRE(newest.damage.size() == 1);
  CHECK(newest.damage[0].file == manifest_name(2));
  CHECK(summary->checkpoints[1].valid());
}

TEST_CASE("a file read whole is refused unread when it is a device or a FIFO, and when it passes its bound") {
  temp_dir dir;
  auto zero = read_regular_file("/dev/zero", 1024, symlinks::follow);
  REQUIRE(!zero);
  CHECK(is(zero.error(), errc::invalid_argument));
  CHECK_MESSAGE(has(describe(zero.error()), "/dev/zero: not a regular file (it is a character device)"),
                describe(zero.error()));

  auto fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  caf::expected<std::string> from_fifo{""};
  REQUIRE(returns_without_blocking(fifo, [&] { from_fifo = read_regular_file(fifo, 1024, symlinks::follow); }));
  REQUIRE(!from_fifo);
  CHECK(has(describe(from_fifo.error()), "it is a FIFO"));

  write_text(dir / "big", std::string(1025, 'x'));
  auto big = read_regular_file(dir / "big", 1024, symlinks::follow);
  REQUIRE(!big);
  CHECK(has(describe(big.error()), "larger than 1024 bytes"));
  write_text(dir / "fits", std::string(1024, 'y'));
  auto fits = read_regular_file(dir / "fits", 1024, symlinks::follow);
  REQUIRE_MESSAGE(fits, describe(fits.error()));
  CHECK(*fits == std::string(1024, 'y'));

  fs::create_symlink(dir / "fits", dir / "link");
  CHECK(read_regular_file(dir / "link", 1024, symlinks::follow));
  auto refused = read_regular_file(dir / "link", 1024, symlinks::refuse);
  REQUIRE(!refused);
  CHECK(has(describe(refused.error()), "it is a symbolic link"));
}
