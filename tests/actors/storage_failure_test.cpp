// Storage that fails for a while or for good (checkpoint_config's
// max_log_bytes, retry_min/retry_max and storage_deadline): workers pause
// at a checkpoint step when their replay log is over its bound and resume
// when that checkpoint commits, so their logs stay within the bound plus
// one interval; a BSP run stays bit-identical to a clean one; storage
// broken past the deadline fails the job with one error naming the last
// good checkpoint, which stays valid for a resume; repeated identical
// failures reach the timeline summarised. Real jobs of the probe model,
// storage faults from the fault plan; and the CLI's range errors.
#include <algorithm>
#include <chrono>
#include <string>

#include "actors/core/failure_series.hpp"
#include "cli_run.hpp"
#include "job_fixture.hpp"
#include "storage/snapshot_store.hpp"

using namespace keel;
using namespace keel::test;

namespace {

constexpr uint64_t steps = 120;
constexpr uint64_t every = 10;

job_config probe_run(const temp_dir& dir, const std::string& plan = {}) {
  auto c = config_for(probe(), dir, steps);
  c.checkpoints.every = every;
  c.checkpoints.retry_min = std::chrono::milliseconds(1);
  c.checkpoints.retry_max = std::chrono::milliseconds(20);
  if (!plan.empty()) {
    auto p = parse_fault_plan(plan);
    REQUIRE_MESSAGE(p, describe(p.error()));
    c.faults.plan = *p;
  }
  return c;
}

// A clean run: its params_sha256, and how many bytes one worker's step
// logs (without checkpoints the log keeps every push: its peak / steps).
std::pair<std::string, uint64_t> clean_run() {
  temp_dir dir;
  auto c = probe_run(dir);
  c.checkpoints.every = 0;
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(c, *r);
  REQUIRE(r->peak_log_bytes.size() == c.training.workers);
  REQUIRE(r->peak_log_bytes[0] > 0);
  return {r->params_sha256, r->peak_log_bytes[0] / steps};
}

std::vector<job_event> of_kind(const job_result& r, event_kind k) {
  std::vector<job_event> out;
  for (auto& e : r.events)
    if (e.kind == k)
      out.push_back(e);
  return out;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("storage failing for a while: workers pause at the bound, their logs stay within it plus one "
          "interval, and the run ends bit-identical once storage heals") {
  auto [clean_sha, step_bytes] = clean_run();
  temp_dir dir;
  // Every checkpoint write fails for 1.5 s from step 15 (checkpoint 1 at
  // step 10 committed): far longer than the run takes unpaused.
  auto c = probe_run(dir, "enospc:write@15+1500ms");
  c.checkpoints.max_log_bytes = 25 * step_bytes;  // two and a half intervals
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(c, *r);
  check_faults_fired(c, *r);
  CHECK(r->params_sha256 == clean_sha);
  auto paused = of_kind(*r, event_kind::backpressure);
  CHECK(paused.size() >= c.training.workers);
  CHECK(of_kind(*r, event_kind::resumed).size() == paused.size());
  for (auto& e : paused) {
    CHECK(e.step % every == 0);
    CHECK(e.count > c.checkpoints.max_log_bytes);
  }
  REQUIRE(r->peak_log_bytes.size() == c.training.workers);
  for (auto peak : r->peak_log_bytes) {
    CHECK(peak > c.checkpoints.max_log_bytes);  // the bound was reached ...
    CHECK(peak <= c.checkpoints.max_log_bytes + every * step_bytes);  // ... and held
  }
  CHECK(!of_kind(*r, event_kind::checkpoint_failed).empty());
}

TEST_CASE("storage broken past the deadline fails the job naming the last good checkpoint, which stays "
          "valid, and a resume from it ends bit-identical to a clean run") {
  auto clean_sha = clean_run().first;
  temp_dir dir;
  auto c = probe_run(dir, "enospc:write@15+60000ms");
  c.checkpoints.max_log_bytes = 1;  // every worker pauses at the first checkpoint step that fails
  c.checkpoints.storage_deadline = std::chrono::milliseconds(1500);
  auto t0 = std::chrono::steady_clock::now();
  auto r = run(c);
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(!r);
  auto why = describe(r.error());
  CAPTURE(why);
  CHECK(has(why, "past the storage deadline of 1.5 s"));
  CHECK(has(why, "No space left on device"));
  CHECK(has(why, "the last good checkpoint is 1 (step 10) in " + dir.path().string()));
  CHECK(has(why, "keel train --resume " + dir.path().string()));
  CHECK(took < c.checkpoints.storage_deadline + std::chrono::seconds(5));

  {
    auto store = snapshot_store::open(dir.path(), {});
    REQUIRE(store);
    auto ids = (*store)->committed();
    REQUIRE(ids);
    CHECK(*ids == std::vector<uint64_t>{1});
    auto loaded = (*store)->load(1);
    CHECK_MESSAGE(loaded, describe(loaded.error()));
  }
  auto again = probe_run(dir);  // the same run, storage healthy
  again.checkpoints.resume = true;
  auto resumed = run(again);
  REQUIRE_MESSAGE(resumed, describe(resumed.error()));
  CHECK(resumed->resumed_at_step == 10);
  CHECK(resumed->params_sha256 == clean_sha);
  CHECK(resumed->pushes_applied == resumed->pushes_acked);
}

TEST_CASE("checkpoints lost while the workers are paused fail the job at the storage deadline, not hang") {
  temp_dir dir;
  // From step 15 on, shard 0's snapshots never reach the checkpointer:
  // each later checkpoint is lost, and the paused workers wait for one.
  auto c = probe_run(dir, "drop:shard:0>checkpointer@15x1000");
  c.checkpoints.max_log_bytes = 1;
  c.checkpoints.timeout = std::chrono::milliseconds(200);
  c.checkpoints.storage_deadline = std::chrono::milliseconds(1000);
  auto r = run(c);
  REQUIRE(!r);
  auto why = describe(r.error());
  CAPTURE(why);
  CHECK(has(why, "past the storage deadline of 1.0 s"));
  CHECK(has(why, "lost, only shard(s) 1 of 2 reported a written snapshot"));
}

TEST_CASE("50 identical checkpoint failures reach the timeline as 3 events: the first, the 10th, the total") {
  temp_dir dir;
  auto c = probe_run(dir, "enospc:write@5x50");
  c.checkpoints.max_log_bytes = 1;  // the workers wait while the checkpoint is retried
  auto r = run(c);
  REQUIRE_MESSAGE(r, describe(r.error()));
  check_exactly_once(c, *r);
  auto failed = of_kind(*r, event_kind::checkpoint_failed);
  REQUIRE(failed.size() == 3);
  CHECK(failed[0].count == 1);
  CHECK(has(failed[0].detail, "No space left on device"));
  CHECK(failed[1].count == 10);
  CHECK(has(failed[1].detail, "checkpoint failed 10 times since"));
  CHECK(failed[2].count == 50);
  CHECK(has(failed[2].detail, "checkpoint failed 50 times in all"));
  CHECK(has(failed[2].detail, "ended by checkpoint 1 committed at step 10"));
}

TEST_CASE("failure_series folds digits, summarises at 10^k and ends with the total") {
  failure_series s;
  uint64_t shown = 0;
  for (int i = 1; i <= 1000; ++i)
    shown += s.failed("checkpoint " + std::to_string(i) + ": disk full", i).size();
  CHECK(shown == 4);  // 1, 10, 100, 1000
  // A shard's file names carry a hex tag: words holding a digit fold whole.
  CHECK(failure_series::key_of("ckpt-00000000000000000003.shard-0.1f2e3d4c5b6a7988.snap: disk full") ==
        failure_series::key_of("ckpt-00000000000000000004.shard-1.ffee0000aabb1234.snap: disk full"));
  CHECK(failure_series::key_of("disk full") != failure_series::key_of("disk fill"));
  auto other = s.failed("checkpoint 1001: read-only", 1001);
  REQUIRE(other.size() == 2);  // the old series' total, the new one's first
  CHECK(other[0].count == 1000);
  CHECK(other[1].count == 1);
  CHECK(s.ended("checkpoint 9 committed", 2000).empty());  // one failure: its line said it all
}

TEST_CASE("keel train's --replay-log-mb and --storage-deadline-s refuse values out of range with one line, "
          "exit 2") {
  const std::pair<std::string, std::string> cases[] = {
    {"--replay-log-mb -1", "keel train: --replay-log-mb: '-1' is negative"},
    {"--replay-log-mb 2000000000", "keel train: --replay-log-mb: '2000000000' is too large"},
    {"--replay-log-mb x", "keel train: --replay-log-mb: 'x' is not a number"},
    {"--storage-deadline-s 0", "keel train: --storage-deadline-s: '0' is too small (at least 1)"},
    {"--storage-deadline-s 1e3", "keel train: --storage-deadline-s:"},
  };
  for (auto& [arguments, expected] : cases) {
    CAPTURE(arguments);
    auto r = run_command(std::string(KEEL_CLI_PATH) + " train " + arguments);
    CAPTURE(r.output);
    CHECK(r.status == 2);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
    CHECK(has(r.output, expected));
  }
}
