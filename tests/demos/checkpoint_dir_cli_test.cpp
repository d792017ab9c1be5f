// The real `keel` binary (KEEL_CLI_PATH) with a checkpoint directory someone
// else can write (README: a filesystem every node shares): whatever it
// holds, keel writes no file outside it, never takes an output path, an
// address or a port from it, never blocks on a FIFO in it, and treats a
// checkpoint whose manifest disagrees with its snapshots as damaged.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <sys/stat.h>
#include <sys/wait.h>

#include "../actors/job_fixture.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/store_layout.hpp"
#include "train_args.hpp"

using namespace keel;
using namespace keel::test;

namespace {

namespace fs = std::filesystem;

struct run_result {
  int status = -1;
  std::string out;  // standard output and standard error
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs `keel ARGUMENTS` to its end, killed after 60 s: a keel blocked on a
// FIFO fails the test (exit 124) instead of hanging it.
run_result run_keel(const temp_dir& dir, const std::string& arguments) {
  auto out = dir.path() / "output";
  std::string cmd = "timeout 60 " + std::string(KEEL_CLI_PATH) + " " + arguments + " >" + out.string() +
                    " 2>&1 </dev/null";
  int raw = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(raw));
  return {WEXITSTATUS(raw), slurp(out)};
}

// A finished probe run with checkpoints at steps 10, 20, 30 and 40 in `ckpt`.
void checkpointed_run(const temp_dir& dir, const fs::path& ckpt) {
  auto r = run_keel(dir, "train --model probe --steps 40 --checkpoint-every 10 --quiet --checkpoint-dir " +
                           ckpt.string());
  REQUIRE_MESSAGE(r.status == 0, r.out);
}

// The committed checkpoints in `dir`, ascending.
std::vector<uint64_t> committed(const fs::path& dir) {
  std::vector<uint64_t> ids;
  for (auto& e : fs::directory_iterator(dir))
    if (auto f = parse_store_file_name(e.path().filename().string()); f && f->kind == store_file_kind::manifest)
      ids.push_back(f->checkpoint);
  std::sort(ids.begin(), ids.end());
  return ids;
}

checkpoint_manifest manifest_of(const fs::path& dir, uint64_t id) {
  auto pool = buffer_pool::create(0, 0);
  auto m = read_manifest_file(*posix_io(), dir / manifest_name(id), *pool);
  REQUIRE_MESSAGE(m, describe(m.error()));
  return *m;
}

}  // namespace

TEST_CASE("keel train --resume refuses a keel-train.args naming an output file, an address or a port, naming the flag, and writes nothing") {
  temp_dir dir;
  auto ckpt = dir.path() / "ckpt";
  checkpointed_run(dir, ckpt);
  auto args_file = ckpt / "keel-train.args";
  auto recorded = slurp(args_file);
  auto victim = dir.path() / "victim";
  const std::vector<std::pair<std::string, std::string>> added = {
    {"--report\n" + victim.string() + "\n", "--report"},
    {"--plot=" + victim.string() + "\n", "--plot"},
    {"--metrics-file\n" + victim.string() + "\n", "--metrics-file"},
    {"--metrics-address\n0.0.0.0\n--metrics-port\n0\n", "--metrics-address"},
    {"--metrics-port=0\n", "--metrics-port"}};
  for (auto& [lines, flag] : added) {
    CAPTURE(lines);
    write_text(victim, "precious\n");
    write_text(args_file, recorded + lines);
    auto r = run_keel(dir, "train --resume " + ckpt.string() + " --steps 60 --quiet");
    CHECK_MESSAGE(r.status == 1, r.out);
    CHECK_MESSAGE(has(r.out, "keel-train.args records " + flag + ", which a checkpoint directory may not choose"),
                  r.out);
    CHECK_FALSE(has(r.out, "metrics on http://"));
    CHECK(slurp(victim) == "precious\n");
  }
  // The outputs come from the command line.
  write_text(args_file, recorded);
  auto r = run_keel(dir, "train --resume " + ckpt.string() + " --steps 60 --quiet --report " +
                           (dir.path() / "r.json").string());
  CHECK_MESSAGE(r.status == 0, r.out);
  CHECK(fs::is_regular_file(dir.path() / "r.json"));
}

TEST_CASE("keel train records in keel-train.args the flags that decide the run, and no output file, address or port") {
  temp_dir dir;
  auto ckpt = dir.path() / "ckpt";
  auto r = run_keel(dir, "train --model probe --steps 20 --checkpoint-every 10 --seed 7 --quiet --checkpoint-dir " +
                           ckpt.string() + " --report " + (dir.path() / "r.json").string() + " --metrics-file " +
                           (dir.path() / "m.jsonl").string() + " --metrics-every-ms 50");
  REQUIRE_MESSAGE(r.status == 0, r.out);
  auto recorded = slurp(ckpt / "keel-train.args");
  CHECK(recorded == "--model\nprobe\n--steps\n20\n--checkpoint-every\n10\n--seed\n7\n--quiet\n");
}

TEST_CASE("every flag of keel train is either recorded for --resume or, an output, an address or a port, the command line's alone") {
  temp_dir dir;
  auto help = run_keel(dir, "train --help");
  REQUIRE(help.status == 0);
  // The flags --resume never takes from the directory; any other flag
  // keel train has decides the run and is recorded (a new flag must be
  // put on one side or the other).
  const std::set<std::string> command_line_only = {"--help",        "--checkpoint-dir",  "--resume",
                                                   "--report",      "--plot",            "--metrics-port",
                                                   "--metrics-address", "--metrics-file", "--metrics-every-ms"};
  std::set<std::string> flags;
  // A flag's own line starts with two spaces and "--" (a wrapped line of
  // its description does not).
  std::istringstream lines(help.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  --", 0) != 0 || line.size() < 5 || !std::islower(static_cast<unsigned char>(line[4]))) continue;
    auto end = line.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-", 4);
    flags.insert(line.substr(2, end == std::string::npos ? std::string::npos : end - 2));
  }
  REQUIRE(flags.size() > command_line_only.size());
  for (auto& flag : command_line_only) CHECK_MESSAGE(flags.count(flag) == 1, flag);
  for (auto& flag : flags) {
    CAPTURE(flag);
    CHECK(cli::recorded_train_flag(flag) == (command_line_only.count(flag) == 0));
  }
}

TEST_CASE("keel train writes no file through links in its checkpoint directory") {
  temp_dir dir;
  auto victim = dir.path() / "victim";
  write_text(victim, "precious\n");

  // The lock file: refused, naming it.
  auto locked = dir.path() / "locked";
  fs::create_directory(locked);
  fs::create_symlink(victim, locked / "keel.lock");
  auto refused = run_keel(dir, "train --model probe --steps 20 --quiet --checkpoint-dir " + locked.string());
  CHECK_MESSAGE(refused.status == 1, refused.out);
  CHECK_MESSAGE(has(refused.out, (locked / "keel.lock").string() + ": not a regular file (it is a symbolic link"),
                refused.out);
  CHECK(slurp(victim) == "precious\n");

  // The recorded arguments and any temporary name of theirs: links are
  // replaced or left alone, never written through.
  auto ckpt = dir.path() / "ckpt";
  fs::create_directory(ckpt);
  fs::create_symlink(victim, ckpt / "keel-train.args.tmp");
  fs::create_symlink(victim, ckpt / "keel-train.args");
  auto r = run_keel(dir, "train --model probe --steps 20 --checkpoint-every 10 --quiet --checkpoint-dir " +
                           ckpt.string());
  CHECK_MESSAGE(r.status == 0, r.out);
  CHECK(slurp(victim) == "precious\n");
  CHECK(fs::is_regular_file(fs::symlink_status(ckpt / "keel-train.args")));
}

TEST_CASE("a FIFO in a checkpoint directory never blocks keel inspect or keel train --resume: it is damage, or refused") {
  temp_dir dir;
  auto ckpt = dir.path() / "ckpt";
  checkpointed_run(dir, ckpt);
  auto ids = committed(ckpt);
  REQUIRE(ids.size() >= 2);
  auto newest = ids.back();
  auto before = manifest_of(ckpt, ids[ids.size() - 2]).step;
  auto snapshot = ckpt / manifest_of(ckpt, newest).shards.at(0).file;
  fs::remove(snapshot);
  REQUIRE(::mkfifo(snapshot.c_str(), 0644) == 0);

  auto inspect = run_keel(dir, "inspect " + ckpt.string());
  CHECK_MESSAGE(inspect.status == 1, inspect.out);
  CHECK_MESSAGE(has(inspect.out, snapshot.string() + ": not a regular file (it is a FIFO)"), inspect.out);

  auto resumed = run_keel(dir, "train --resume " + ckpt.string() + " --steps 60 --quiet");
  CHECK_MESSAGE(resumed.status == 0, resumed.out);
  CHECK_MESSAGE(has(resumed.out, "resumed at step " + std::to_string(before)), resumed.out);

  auto args_file = ckpt / "keel-train.args";
  fs::remove(args_file);
  REQUIRE(::mkfifo(args_file.c_str(), 0644) == 0);
  auto refused = run_keel(dir, "train --resume " + ckpt.string() + " --quiet");
  CHECK_MESSAGE(refused.status == 1, refused.out);
  CHECK_MESSAGE(has(refused.out, args_file.string() + ": not a regular file (it is a FIFO)"), refused.out);
}

TEST_CASE("a manifest whose step was changed from its snapshots' is damaged: keel inspect names it, --resume falls back") {
  temp_dir dir;
  auto ckpt = dir.path() / "ckpt";
  checkpointed_run(dir, ckpt);
  auto ids = committed(ckpt);
  REQUIRE(ids.size() >= 2);
  auto newest = ids.back();
  auto before = manifest_of(ckpt, ids[ids.size() - 2]).step;
  // Its CRCs made right again: an edit, not a bit flip.
  auto m = manifest_of(ckpt, newest);
  auto taken = m.step;
  m.step += 20;
  fs::remove(ckpt / manifest_name(newest));
  REQUIRE(!write_manifest_file(*posix_io(), ckpt, manifest_name(newest), m, "edit"));

  auto inspect = run_keel(dir, "inspect " + ckpt.string());
  CHECK_MESSAGE(inspect.status == 1, inspect.out);
  CHECK_MESSAGE(has(inspect.out, manifest_name(newest) + ": records step " + std::to_string(m.step) +
                                   ", but its snapshots were taken at step " + std::to_string(taken)),
                inspect.out);

  auto resumed = run_keel(dir, "train --resume " + ckpt.string() + " --steps 80 --quiet");
  CHECK_MESSAGE(resumed.status == 0, resumed.out);
  CHECK_MESSAGE(has(resumed.out, "resumed at step " + std::to_string(before)), resumed.out);
}
