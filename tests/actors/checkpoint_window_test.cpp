// The checkpoint window as a plain value: the workers' window, the storage
// deadline of failing writes, and the failure series' lines, tested without
// a job.
#include <doctest/doctest.h>

#include "actors/job/checkpoint_window.hpp"
#include "built_by_hand.hpp"

using namespace keel;
using keel::test::part;
using namespace std::chrono_literals;

namespace {

using tp = std::chrono::steady_clock::time_point;

}  // namespace

TEST_CASE("a failed checkpoint moves the window past it and a commit moves it on") {
  checkpoint_window w(10, 5000ms, 1000ms);
  CHECK(w.window() == 20);
  auto failed = w.failed(10, "checkpoint 1 failed: disk full", true, 0, tp{});
  CHECK(failed.window_moved);
  CHECK(w.window() == 30);
  auto committed = w.committed(2, 20, {part(0, 20)}, 10);
  CHECK(committed.window_moved);
  CHECK(w.window() == 40);
  CHECK(w.snapshots()->for_shard(0).size() == 1);
}

TEST_CASE("write failures start the storage deadline, a commit stops it, and past it the job fails naming the last good checkpoint") {
  checkpoint_window w(10, 5000ms, 1000ms);
  tp t0{};
  CHECK_FALSE(w.storage_deadline());
  w.committed(1, 10, {part(0, 10)}, 0);
  w.failed(20, "checkpoint 2: write failed", true, 100, t0);
  REQUIRE(w.storage_deadline());
  CHECK(*w.storage_deadline() == t0 + 1000ms);
  w.failed(30, "checkpoint 3: write failed", true, 200, t0 + 500ms);
  CHECK(*w.storage_deadline() == t0 + 1000ms);  // counts from the first failure since the commit
  CHECK_FALSE(w.storage_expired(t0 + 999ms, "/ckpt"));
  auto why = w.storage_expired(t0 + 1000ms, "/ckpt");
  REQUIRE(why);
  CHECK(why->find("2 failures in a row") != std::string::npos);
  CHECK(why->find("the last: checkpoint 3: write failed") != std::string::npos);
  CHECK(why->find("the last good checkpoint is 1 (step 10) in /ckpt") != std::string::npos);
  w.committed(4, 40, {part(0, 40)}, 300);
  CHECK_FALSE(w.storage_deadline());
  CHECK(w.last_good() == 4);
  CHECK(w.last_good_step() == 40);
}

TEST_CASE("a lost checkpoint starts the storage deadline only while a worker is paused by backpressure") {
  checkpoint_window w(10, 5000ms, 1000ms);
  w.failed(10, "checkpoint 1 is lost", false, 0, tp{});
  CHECK_FALSE(w.storage_deadline());
  w.paused("worker:0");
  w.failed(20, "checkpoint 2 is lost", false, 0, tp{});
  CHECK(w.storage_deadline());
  w.committed(3, 30, {part(0, 30)}, 0);
  w.resumed("worker:0");
  w.failed(40, "checkpoint 4 is lost", false, 0, tp{});
  CHECK_FALSE(w.storage_deadline());
  w.paused("worker:1");
  w.clear_paused();  // a new tree's workers start unpaused
  w.failed(50, "checkpoint 5 is lost", false, 0, tp{});
  CHECK_FALSE(w.storage_deadline());
}

TEST_CASE("past the storage deadline with nothing committed the job fails saying there is nothing to resume from") {
  checkpoint_window w(10, 5000ms, 100ms);
  w.failed(10, "checkpoint 1: write failed", true, 0, tp{});
  auto why = w.storage_expired(tp{} + 100ms, "/ckpt");
  REQUIRE(why);
  CHECK(why->find("nothing to resume from") != std::string::npos);
  CHECK(why->find("1 failures in a row") != std::string::npos);
}

TEST_CASE("repeated identical failures come as the first line and then summaries, and the commit that ends them gives the total") {
  checkpoint_window w(10, 5000ms, 60000ms);
  size_t lines = 0;
  for (uint64_t i = 1; i <= 12; ++i)
    lines += w.failed(i * 10, "checkpoint " + std::to_string(i) + ": write failed", true, 0, tp{}).lines.size();
  CHECK(lines == 2);  // the first, and the summary at the 10th
  auto ended = w.committed(13, 130, {part(0, 130)}, 0);
  REQUIRE(ended.lines.size() == 1);
  CHECK(ended.lines[0].count == 12);
  CHECK(w.committed(14, 140, {part(0, 140)}, 0).lines.empty());  // no series, no line
}

TEST_CASE("a restored checkpoint is the last good one a storage failure names") {
  checkpoint_window w(10, 5000ms, 100ms);
  w.restored(7, 70);
  w.start_at(70);
  CHECK(w.window() == 90);
  w.failed(80, "checkpoint 8: write failed", true, 0, tp{});
  auto why = w.storage_expired(tp{} + 100ms, "/ckpt");
  REQUIRE(why);
  CHECK(why->find("the last good checkpoint is 7 (step 70)") != std::string::npos);
}
