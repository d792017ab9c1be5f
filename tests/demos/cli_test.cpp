// Runs the real `keel` binary (KEEL_CLI_PATH) as a process: train with
// --report and --plot, plot from the report, and every command's --help and
// bad-usage paths (exit 2, exactly one line on stderr naming the flag).
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/wait.h>

#include "../actors/job_fixture.hpp"
#include "run_report.hpp"
#include "svg_reading.hpp"

using namespace keel;
using namespace keel::test;

namespace {

struct run_result {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `keel ARGUMENTS` with stdout and stderr captured apart.
run_result run_keel(const temp_dir& dir, const std::string& arguments) {
  auto out = dir.path() / "stdout", err = dir.path() / "stderr";
  std::string cmd = std::string(KEEL_CLI_PATH) + " " + arguments + " >" + out.string() + " 2>" +
                    err.string() + " </dev/null";
  int raw = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(raw));
  return {WEXITSTATUS(raw), slurp(out), slurp(err)};
}

size_t lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("keel train --report --plot writes both, and keel plot redraws the same picture from the report") {
  temp_dir dir;
  auto d = dir.path().string();
  auto train = run_keel(dir, "train --model probe --steps 60 --checkpoint-every 10 --kill shard:0@step=20 "
                             "--checkpoint-dir " + d + "/ckpt --report " + d + "/r.json --plot " + d + "/r.svg");
  CAPTURE(train.out);
  CAPTURE(train.err);
  REQUIRE(train.status == 0);
  auto report = cli::read_report(dir.path() / "r.json");
  REQUIRE_MESSAGE(report, describe(report.error()));
  REQUIRE(report->recoveries.size() >= 1);
  CHECK(report->progress.size() == 10);  // every 6 of 60 steps
  auto svg = slurp(dir.path() / "r.svg");
  auto doc = parse_svg(svg);
  CHECK(elements_of_class(doc, "recovery").size() == report->recoveries.size());
  CHECK(elements_of_class(doc, "marker fault").size() == 1);
  CHECK(polyline_points(doc, "series loss").size() == 10);

  auto plot = run_keel(dir, "plot " + d + "/r.json -o " + d + "/x.svg");
  CAPTURE(plot.err);
  CHECK(plot.status == 0);
  CHECK(plot.err.empty());
  CHECK(slurp(dir.path() / "x.svg") == svg);
}

TEST_CASE("keel plot exits 1 with one line naming the file for a missing or malformed report") {
  temp_dir dir;
  auto d = dir.path().string();
  std::ofstream(dir.path() / "bad.json") << "{\"model\": 3}";
  for (auto [file, problem] : {std::pair<std::string, std::string>{"nope.json", "no such file"},
                               {"bad.json", "model: expected a string, found 3"}}) {
    auto r = run_keel(dir, "plot " + d + "/" + file + " -o " + d + "/x.svg");
    CAPTURE(r.err);
    CHECK(r.status == 1);
    CHECK(lines(r.err) == 1);
    CHECK(has(r.err, "keel plot: " + d + "/" + file + ": "));
    CHECK(has(r.err, problem));
    CHECK(!std::filesystem::exists(dir.path() / "x.svg"));
  }
}

TEST_CASE("every command rejects a bad flag, a missing or bad value with one line on stderr and exit 2") {
  temp_dir dir;
  const std::pair<std::string, std::string> cases[] = {
    {"frobnicate", "keel: unknown command 'frobnicate'"},
    {"--frobnicate", "keel: --frobnicate: unknown flag"},
    {"train --shards x", "keel train: --shards: 'x' is not a number (see keel train --help)"},
    {"train --consistency foo", "keel train: --consistency: consistency 'foo' is not bsp"},
    {"train --steps -1", "keel train: --steps: '-1' is negative"},
    {"train --steps 1.5", "keel train: --steps: '1.5' is not a whole number"},
    {"train --workers 0", "keel train: --workers: '0' is too small (at least 1)"},
    {"train --frobnicate", "keel train: --frobnicate: unknown flag"},
    {"train --shard 2", "keel train: --shard: unknown flag"},  // no guessing of abbreviations
    {"train --report", "keel train: --report: a value is missing"},
    {"train --steps 5 --steps 6", "keel train: --steps: given more than once"},
    {"train --quiet=yes", "keel train: --quiet: takes no value"},
    {"train --model nope", "keel train: --model: unknown model"},
    {"train --optimizer sgdd", "keel train: --optimizer:"},
    {"train --fault-rate 1e9", "keel train: --fault-rate: '1e9' is too large (at most 100)"},
    {"train stray", "keel train: unexpected argument 'stray'"},
    {"chaos --seeds many", "keel chaos: --seeds: 'many' is not a number"},
    {"chaos --steps 5", "keel chaos: --steps: '5' is too small (at least 20)"},
    {"chaos --mix kills,gremlins", "keel chaos: --mix:"},
    {"inspect --frobnicate", "keel inspect: --frobnicate: unknown flag"},
    {"inspect", "keel inspect: missing DIR"},
    {"plot", "keel plot: missing REPORT.json"},
    {"plot r.json", "keel plot: missing -o FILE.svg"},
    {"plot r.json -o", "keel plot: --output: a value is missing"},
    {"plot r.json --scale 2", "keel plot: --scale: unknown flag"},
  };
  for (auto& [arguments, expected] : cases) {
    CAPTURE(arguments);
    auto r = run_keel(dir, arguments);
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(lines(r.err) == 1);
    CHECK(has(r.err, expected));
    CHECK(r.out.empty());
  }
}

TEST_CASE("keel --help and every command's --help exit 0 and list every flag with its default") {
  temp_dir dir;
  const std::pair<std::string, std::vector<std::string>> commands[] = {
    {"train",
     {"--help", "--model", "--shards", "--workers", "--consistency", "--optimizer", "--lr", "--batch",
      "--epochs", "--steps", "--seed", "--checkpoint-dir", "--resume", "--checkpoint-every", "--kill", "--faults",
      "--random-faults", "--fault-rate", "--fault-mix", "--request-timeout", "--report", "--plot",
      "--data-dir", "--train-limit", "--test-limit", "--timeout", "--quiet", "--verbose"}},
    {"chaos",
     {"--help", "--seeds", "--first-seed", "--model", "--consistency", "--steps", "--faults", "--mix",
      "--data-dir"}},
    {"inspect", {"--help", "--verify"}},
    {"plot", {"--help", "--output"}},
  };
  for (auto& [command, flags] : commands) {
    CAPTURE(command);
    auto r = run_keel(dir, command + " --help");
    CAPTURE(r.out);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(has(r.out, "usage: keel " + command));
    for (auto& flag : flags)
      CHECK_MESSAGE((has(r.out, "  " + flag + " ") || has(r.out, ", " + flag + " ")), flag);
    // Every flag line says its default, that it has none, or that it is a switch.
    std::istringstream in(r.out);
    std::string line, entry;
    auto check_entry = [&] {
      if (!entry.empty())
        CHECK_MESSAGE((has(entry, "default") || has(entry, "(a switch: off unless given)")), entry);
      entry.clear();
    };
    while (std::getline(in, line)) {
      if (line.rfind("  -", 0) == 0)
        check_entry();
      if (line.rfind("  -", 0) == 0 || (!entry.empty() && line.rfind("    ", 0) == 0)) {
        std::istringstream words(line);  // a wrapped description: join its words
        for (std::string w; words >> w;)
          entry += (entry.empty() ? "" : " ") + w;
      }
    }
    check_entry();
  }
  auto top = run_keel(dir, "--help");
  CHECK(top.status == 0);
  for (auto name : {"train", "chaos", "inspect", "plot"})
    CHECK_MESSAGE(has(top.out, "  " + std::string(name) + " "), name);
  auto help_train = run_keel(dir, "help train");
  CHECK(help_train.status == 0);
  CHECK(has(help_train.out, "--plot FILE"));
}

TEST_CASE("keel train removes the checkpoint directory it made after a success, and keeps it after a failure") {
  temp_dir dir;
  auto dir_in = [](const std::string& text, const std::string& after) {
    auto at = text.find(after);
    REQUIRE(at != std::string::npos);
    auto begin = at + after.size();
    return text.substr(begin, text.find_first_of(" \n", begin) - begin);
  };
  auto ok = run_keel(dir, "train --model probe --steps 40");
  CAPTURE(ok.out);
  REQUIRE(ok.status == 0);
  auto made = dir_in(ok.out, "checkpoints in ");
  CHECK(made.rfind("/tmp/keel-train-", 0) == 0);
  CHECK_FALSE(std::filesystem::exists(made));

  // Too many steps to finish within a second: the run fails, and its
  // checkpoints stay for --resume.
  auto failed = run_keel(dir, "train --model probe --steps 100000 --timeout 1 --quiet");
  CAPTURE(failed.err);
  REQUIRE(failed.status == 1);
  auto kept = dir_in(failed.err, "its checkpoints stay in ");
  CHECK(std::filesystem::exists(std::filesystem::path(kept) / "keel-train.args"));
  std::filesystem::remove_all(kept);
}

TEST_CASE("keel train without checkpoints warns how much the replay logs will hold") {
  temp_dir dir;
  auto r = run_keel(dir, "train --model probe --steps 10 --checkpoint-every 0 --quiet");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  CHECK(has(r.err, "without checkpoints the workers keep every push in memory, about "));
  CHECK(has(r.err, "--checkpoint-every N bounds it"));
  auto with = run_keel(dir, "train --model probe --steps 10 --quiet");
  CHECK(with.status == 0);
  CHECK_FALSE(has(with.err, "without checkpoints"));
}

TEST_CASE("keel train of a model with embedding tables exits 1 naming the tables, before any job") {
  temp_dir dir;
  auto r = run_keel(dir, "train --model ctr-lr --steps 10 --quiet");
  CAPTURE(r.err);
  CHECK(r.status == 1);
  CHECK(lines(r.err) == 1);
  CHECK(has(r.err, "ctr-lr keeps its parameters in embedding tables"));
  CHECK(has(r.err, "ctr_plain_bench"));
}
