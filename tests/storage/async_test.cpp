#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <doctest/doctest.h>

#include "storage/async_snapshot_store.hpp"
#include "storage/faulty_io.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

std::shared_ptr<snapshot_store> open_shared(const fs::path& dir, store_options opts = {}) {
  auto s = snapshot_store::open(dir, opts);
  REQUIRE_MESSAGE(s, describe(s.error()));
  return std::shared_ptr<snapshot_store>(std::move(*s));
}

// Collects callback results across threads; waiting is on a condition, not time.
template <class T>
struct results {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<caf::expected<T>> got;
  typename async_snapshot_store::callback<T> sink() {
    return [this](caf::expected<T> r) {
      std::lock_guard<std::mutex> guard(mtx);
      got.push_back(std::move(r));
      cv.notify_all();
    };
  }
  void wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mtx);
    cv.wait(lock, [&] { return got.size() >= n; });
  }
};

}  // namespace

TEST_CASE("snapshots written through the asynchronous API from futures commit and read back") {
  temp_dir dir;
  async_snapshot_store async(open_shared(dir.path()), 2);
  std::vector<std::future<caf::expected<manifest_entry>>> pending;
  for (uint32_t s = 0; s < 4; ++s)
    pending.push_back(async.write_snapshot(sample_snapshot(1, s)));
  checkpoint_manifest m{1, 10, 0, {}, {}};
  for (auto& f : pending) {
    auto e = f.get();
    REQUIRE_MESSAGE(e, describe(e.error()));
    m.shards.push_back(*e);
  }
  auto committed = async.commit(m).get();
  REQUIRE_MESSAGE(committed, describe(committed.error()));
  auto latest = async.latest_valid().get();
  REQUIRE(latest);
  CHECK(latest->checkpoint.snapshots.size() == 4);
  auto one = async.read_snapshot(1, 3).get();
  REQUIRE(one);
  check_sample(*one, 1, 3);
}

TEST_CASE("completion callbacks run off the caller's thread and carry errors as values") {
  temp_dir dir;
  auto io = faulty_io::wrap();
  store_options opts;
  opts.io = io;
  async_snapshot_store async(open_shared(dir.path(), opts), 2);
  io->arm(io_fault{io_op::fsync, 1, ENOSPC});
  results<manifest_entry> writes;
  std::mutex ids_mtx;
  std::vector<std::thread::id> ran_on;
  auto caller = std::this_thread::get_id();
  for (uint32_t s = 0; s < 3; ++s)
    async.write_snapshot(sample_snapshot(1, s), [&](caf::expected<manifest_entry> r) {
      {
        std::lock_guard<std::mutex> guard(ids_mtx);
        ran_on.push_back(std::this_thread::get_id());
      }
      writes.sink()(std::move(r));
    });
  writes.wait_for(3);
  size_t failed = 0;
  for (auto& r : writes.got)
    if (!r) {
      ++failed;
      CHECK(contains(describe(r.error()), "(ENOSPC)"));
    }
  CHECK(failed == 1);
  for (auto id : ran_on)
    CHECK(id != caller);
  results<latest_checkpoint> latest;
  async.latest_valid(latest.sink());
  latest.wait_for(1);
  REQUIRE(!latest.got[0]);
  CHECK(is(latest.got[0].error(), errc::not_found));
}

TEST_CASE("an io_executor finishes every queued job before its destructor returns") {
  std::atomic<int> done{0};
  {
    io_executor exec(2);
    for (int i = 0; i < 100; ++i)
      exec.post([&] { done.fetch_add(1); });
  }
  CHECK(done.load() == 100);
  io_executor one(1);
  auto f = one.submit([] { return 42; });
  CHECK(f.get() == 42);
}
