// Runs the real `keel inspect` binary (KEEL_CLI_PATH) on a store written by
// the tests, then on the same store damaged, and checks exit status and output.
#include <fstream>

#include <doctest/doctest.h>

#include "cli_run.hpp"
#include "storage/file_damage.hpp"
#include "storage/store_layout.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

// Runs `keel ARGUMENTS` to its end, standard error folded into the output.
command_result run_keel(const std::string& arguments) {
  auto r = run_command(std::string(KEEL_CLI_PATH) + " " + arguments);
  REQUIRE(r.exited);
  return r;
}

void make_store(const fs::path& dir) {
  auto store = snapshot_store::open(dir);
  REQUIRE(store);
  commit_sample(**store, 1);
  commit_sample(**store, 2);
}

}  // namespace

TEST_CASE("keel inspect lists every checkpoint with step, shards, tensors, shapes and sizes, exit 0") {
  temp_dir dir;
  make_store(dir.path());
  for (std::string flag : {"", " --verify"}) {
    CAPTURE(flag);
    auto r = run_keel("inspect " + dir.path().string() + flag);
    CHECK(r.status == 0);
    CAPTURE(r.output);
    CHECK(contains(r.output, "checkpoint 2  VALID  step 20"));
    CHECK(contains(r.output, "checkpoint 1  VALID  step 10"));
    CHECK(contains(r.output, "shard 1  " + snapshot_name(2, 1)));
    CHECK(contains(r.output, "tensor  w  float32 [64, 32]  8.0 KiB in 9 chunks"));
    CHECK(contains(r.output, "tensor  b  float32 [32]  128 B in 1 chunk"));
    CHECK(contains(r.output, "section optimizer"));
    CHECK(contains(r.output, "2 checkpoints, 2 valid, 0 damaged"));
  }
}

TEST_CASE("keel inspect --verify finds a flipped bit, names the file and the reason, and exits 1") {
  temp_dir dir;
  make_store(dir.path());
  auto victim = dir / snapshot_name(2, 0);
  REQUIRE(!flip_bit(victim, fs::file_size(victim) / 2, 5));
  auto quick = run_keel("inspect " + dir.path().string());
  CAPTURE(quick.output);
  // Without --verify only headers and schemas are read: a flipped data bit
  // needs the CRC check, and the listing says so.
  CHECK(quick.status == 0);
  CHECK(contains(quick.output, "--verify checks every CRC"));
  auto r = run_keel("inspect " + dir.path().string() + " --verify");
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, "checkpoint 2  DAMAGED"));
  CHECK(contains(r.output, "DAMAGED " + snapshot_name(2, 0) + ": damaged_snapshot: " +
                             snapshot_name(2, 0) + ": payload CRC32C mismatch"));
  CHECK(contains(r.output, "checkpoint 1  VALID"));
  CHECK(contains(r.output, "2 checkpoints, 1 valid, 1 damaged"));
}

TEST_CASE("keel inspect reports truncation and a missing snapshot file even without --verify") {
  temp_dir dir;
  make_store(dir.path());
  REQUIRE(!truncate_file(dir / snapshot_name(1, 1), 100));
  fs::remove(dir / snapshot_name(2, 0));
  auto r = run_keel("inspect " + dir.path().string());
  CAPTURE(r.output);
  CHECK(r.status == 1);
  CHECK(contains(r.output, snapshot_name(1, 1) + ": length mismatch"));
  CHECK(contains(r.output, snapshot_name(2, 0) + ": missing, but " + manifest_name(2) + " names it"));
  CHECK(contains(r.output, "2 checkpoints, 0 valid, 2 damaged"));
}

TEST_CASE("keel inspect lists leftovers of a crashed writer without removing them") {
  temp_dir dir;
  make_store(dir.path());
  std::ofstream(dir / (snapshot_name(3, 0) + ".tmp-1-1")) << "partial";
  auto r = run_keel("inspect " + dir.path().string());
  CAPTURE(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "leftover " + snapshot_name(3, 0) + ".tmp-1-1"));
  CHECK(fs::exists(dir / (snapshot_name(3, 0) + ".tmp-1-1")));
}

TEST_CASE("keel inspect exits 2 with a clear message for a missing directory or an unknown flag") {
  temp_dir dir;
  auto missing = run_keel("inspect " + (dir / "nope").string());
  CHECK(missing.status == 2);
  CHECK(contains(missing.output, "nope: no such directory"));
  auto flag = run_keel("inspect " + dir.path().string() + " --frobnicate");
  CHECK(flag.status == 2);
  CHECK(contains(flag.output, "--frobnicate: unknown flag"));
  auto none = run_keel("inspect");
  CHECK(none.status == 2);
  CHECK(contains(none.output, "missing DIR"));
}

TEST_CASE("keel inspect shows each shard's file as a base or a delta with its chain, and a damaged chain file") {
  temp_dir dir;
  {
    store_options opts;
    opts.keep_last = 2;
    auto store = snapshot_store::open(dir.path(), opts);
    REQUIRE(store);
    chain_writer w{**store};
    for (uint64_t id = 1; id <= 3; ++id)
      w.commit(id, id == 1);
  }
  auto r = run_keel("inspect " + dir.path().string());
  CAPTURE(r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "shard 1  " + snapshot_name(3, 1)));
  CHECK(contains(r.output, "delta on checkpoint 1  step 30"));
  CHECK(contains(r.output, "    chain   3 files from the base of checkpoint 1, "));
  CHECK(contains(r.output, "      base   " + snapshot_name(1, 1) + "  8.6 KiB\n"));
  CHECK(contains(r.output, "      delta  " + snapshot_name(2, 1) + "  8.6 KiB\n"));
  CHECK(contains(r.output, "      delta  " + snapshot_name(3, 1) + "  (this file)\n"));
  CHECK(contains(r.output, "2 checkpoints, 2 valid, 0 damaged"));
  CHECK(!contains(r.output, "leftover"));
  fs::remove(dir / snapshot_name(1, 0));
  auto d = run_keel("inspect " + dir.path().string() + " --verify");
  CAPTURE(d.output);
  CHECK(d.status == 1);
  CHECK(contains(d.output, "      base   " + snapshot_name(1, 0) + "  8.6 KiB  DAMAGED\n"));
  CHECK(contains(d.output, "DAMAGED " + snapshot_name(1, 0) + ": damaged_snapshot: " + snapshot_name(1, 0) +
                             ": missing, but " + manifest_name(3) + " names it for shard 0"));
  CHECK(contains(d.output, "2 checkpoints, 0 valid, 2 damaged"));
}
