// Runs the real `keel` binary (KEEL_CLI_PATH) as a process: train with
// --report and --plot, plot from the report, and every command's --help and
// bad-usage paths (exit 2, exactly one line on stderr naming the flag).
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

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

// Runs `keel ARGUMENTS` with stdout and stderr captured apart (behind
// `wrapper`, e.g. "timeout 20 ", when given).
run_result run_keel(const temp_dir& dir, const std::string& arguments, const std::string& wrapper = "") {
  auto out = dir.path() / "stdout", err = dir.path() / "stderr";
  std::string cmd = wrapper + std::string(KEEL_CLI_PATH) + " " + arguments + " >" + out.string() + " 2>" +
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
    {"train --workers 2000", "keel train: --workers: '2000' is too large (at most 1024)"},
    {"train --lr nan", "keel train: --lr: 'nan' is not a number"},
    // A value no flag's own bound covers goes through job::start's check (config_bounds.hpp), named by flag.
    {"train --model probe --rules probe.dense=sgd:2e6",
     "keel train: --rules: training.rules[probe.dense].lr: 2e+06 is too large (at most 1e+06)"},
    {"train --frobnicate", "keel train: --frobnicate: unknown flag"},
    {"train --shard 2", "keel train: --shard: unknown flag"},  // no guessing of abbreviations
    {"train --report", "keel train: --report: a value is missing"},
    {"train --steps 5 --steps 6", "keel train: --steps: given more than once"},
    {"train --quiet=yes", "keel train: --quiet: takes no value"},
    {"train --model nope", "keel train: --model: unknown model"},
    {"train --optimizer sgdd", "keel train: --optimizer:"},
    {"train --model probe --rules probe.dense=rmsprop",
     "keel train: --rules: update rule 'probe.dense=rmsprop': unknown optimizer 'rmsprop' (sgd, momentum, adagrad or adam)"},
    {"train --model probe --rules probe.dense", "keel train: --rules: update rule 'probe.dense': no NAME="},
    {"train --model probe --rules probe.dense=adam:-1", "keel train: --rules: update rule 'probe.dense=adam:-1': learning rate '-1'"},
    {"train --combine avg", "keel train: --combine: unknown way to combine the workers' gradients 'avg' (expected sum or mean)"},
    {"train --fault-rate 1e9", "keel train: --fault-rate: '1e9' is too large (at most 100)"},
    {"train --table-capacity 10", "keel train: --table-capacity: is for models with embedding tables, and mnist-mlp has none"},
    {"train --model ctr-lr --admit-after 70000", "keel train: --admit-after: '70000' is too large (at most 65535)"},
    {"train --model ctr-lr --table-capacity 10 --table-eviction lfr", "keel train: --table-eviction: 'lfr': say lru or lfu"},
    {"train --model ctr-lr --table-eviction lfu", "keel train: --table-eviction: needs --table-capacity"},
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
     {"--help", "--model", "--shards", "--workers", "--consistency", "--optimizer", "--lr", "--batch", "--combine",
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

TEST_CASE("keel train of a model with embedding tables trains on the shards and prints log loss, AUC and params_sha256") {
  temp_dir dir;
  auto d = dir.path().string();
  auto r = run_keel(dir, "train --model ctr-lr --optimizer adagrad --steps 10 --quiet --table-capacity 100 "
                         "--report " + d + "/r.json --metrics-file " + d + "/m.jsonl");
  CAPTURE(r.err);
  CAPTURE(r.out);
  REQUIRE(r.status == 0);
  auto all = r.out + r.err;
  CHECK(has(all, "log loss"));
  CHECK(has(all, "auc"));
  CHECK(has(all, "pushes acked 40, applied 40"));
  CHECK(has(all, "params_sha256 "));
  CHECK(has(all, "slices scored in the run: worker:"));  // the workers scored the held-out set
  // 26 tables of at most 100 rows on each of 2 shards, most of 10 x 2 x 32 x 26 keys evicted again.
  CHECK(has(all, "keel train: 26 embedding tables, 5200 rows, "));
  CHECK(has(all, "bytes a byte); rows evicted "));
  CHECK(has(all, " (least recently updated first), pushed rows refused"));
  auto report = cli::read_report(dir.path() / "r.json");
  REQUIRE_MESSAGE(report, describe(report.error()));
  REQUIRE(report->tables.size() == 26);
  CHECK(report->tables[0].name == "ctr_lr.c1");
  CHECK(report->tables[0].rows == 200);
  // The metrics file's last line holds the job's final numbers, tables included.
  std::ifstream lines(dir.path() / "m.jsonl");
  std::string line, last;
  while (std::getline(lines, line))
    if (!line.empty())
      last = line;
  auto final_metrics = nlohmann::json::parse(last, nullptr, false);
  REQUIRE_MESSAGE(final_metrics.is_object(), last);
  CHECK(final_metrics.contains("keel_table_evictions_total"));
  CHECK(final_metrics["keel_table_rows"]["ctr_lr.c26"] == 200);
}

TEST_CASE("keel train --table-eviction lfu evicts the least frequently updated rows, says so, and trains to another result") {
  temp_dir dir;
  const std::string flags = "train --model ctr-lr --steps 10 --quiet --table-capacity 100";
  auto lru = run_keel(dir, flags);
  auto lfu = run_keel(dir, flags + " --table-eviction lfu");
  CAPTURE(lfu.err);
  CAPTURE(lfu.out);
  REQUIRE(lru.status == 0);
  REQUIRE(lfu.status == 0);
  CHECK(has(lfu.out, " (least frequently updated first), pushed rows refused"));
  CHECK(has(lfu.out, "keel train: 26 embedding tables, 5200 rows, "));
  auto sha = [](const std::string& out) {
    auto at = out.find("params_sha256 ");
    return at == std::string::npos ? std::string() : out.substr(at + 14, 64);
  };
  REQUIRE(sha(lfu.out).size() == 64);
  CHECK(sha(lfu.out) != sha(lru.out));
}

// The configuration hash of the run a checkpoint belongs to (keel inspect's
// "configuration HASH" of its newest checkpoint).
std::string configuration_in(const temp_dir& dir, const std::string& store) {
  auto r = run_keel(dir, "inspect " + store);
  auto at = r.out.find("configuration ");
  REQUIRE_MESSAGE(at != std::string::npos, r.out);
  return r.out.substr(at + 14, 16);
}

TEST_CASE("the click log's size is part of a ctr run's identity: runs on different rows have different configurations") {
  temp_dir dir;
  std::vector<std::string> hashes;
  for (const char* rows : {"3000", "3001", "3000"}) {
    auto store = (dir.path() / ("ck-" + std::to_string(hashes.size()))).string();
    auto r = run_keel(dir, std::string("train --model ctr-lr --optimizer adagrad --train-limit ") + rows +
                               " --test-limit 200 --steps 6 --checkpoint-every 3 --quiet --checkpoint-dir " + store);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    hashes.push_back(configuration_in(dir, store));
  }
  CHECK(hashes[0] != hashes[1]);
  CHECK(hashes[0] == hashes[2]);
}

TEST_CASE("keel inspect shows a ctr run's incremental checkpoints: bases, deltas, their chains and the rows each delta covers") {
  temp_dir dir;
  auto store = (dir.path() / "ck").string();
  auto r = run_keel(dir, "train --model ctr-lr --optimizer adagrad --train-limit 3000 --test-limit 200 --steps 12 "
                         "--checkpoint-every 3 --checkpoint-full-every 3 --checkpoint-delta-fraction 5 --quiet "
                         "--checkpoint-dir " + store);
  REQUIRE_MESSAGE(r.status == 0, r.err);
  auto i = run_keel(dir, "inspect --verify " + store);
  CAPTURE(i.out);
  CHECK(i.status == 0);
  // Checkpoints 1 and 4 are bases, 2, 3 deltas on 1: the store keeps 2, 3, 4.
  CHECK(has(i.out, "delta on checkpoint 1"));
  CHECK(has(i.out, "chain   3 files from the base of checkpoint 1"));
  CHECK(has(i.out, "chain   2 files from the base of checkpoint 1"));
  auto covers = i.out.find("covers  ");
  REQUIRE(covers != std::string::npos);
  CHECK(std::stoul(i.out.substr(covers + 8)) > 0);
  CHECK(has(i.out.substr(covers), "rows changed and 0 removed in 26 tables ("));
}

TEST_CASE("the click-log models default to AdaGrad, batch 128 averaged and a checkpoint every 500 steps, and given flags win") {
  temp_dir dir;
  auto defaults = run_keel(dir, "train --model ctr-lr --train-limit 2048 --test-limit 100 --steps 2");
  REQUIRE_MESSAGE(defaults.status == 0, defaults.err);
  CHECK_MESSAGE(has(defaults.out, "ctr-lr, 2 shards, 2 workers, bsp, adagrad lr 1, 2 steps of batch 128 (the workers' "
                                  "gradients averaged)"),
                defaults.out);
  auto given = run_keel(dir, "train --model ctr-lr --train-limit 2048 --test-limit 100 --steps 2 --optimizer sgd "
                             "--batch 64 --checkpoint-every 1 --combine sum");
  REQUIRE_MESSAGE(given.status == 0, given.err);
  CHECK_MESSAGE(has(given.out, "ctr-lr, 2 shards, 2 workers, bsp, sgd lr 1, 2 steps of batch 64, "), given.out);
  CHECK_MESSAGE(has(given.out, "2 checkpoints committed"), given.out);
  auto mnist = run_keel(dir, "train --model probe --steps 2");
  REQUIRE_MESSAGE(mnist.status == 0, mnist.err);
  CHECK_MESSAGE(has(mnist.out, "sgd lr 1, 2 steps of batch 32, "), mnist.out);
}

TEST_CASE("keel train gives a named tensor its own update rule, and refuses a name its model lacks") {
  temp_dir dir;
  auto plain = run_keel(dir, "train --model probe --steps 6");
  auto ruled = run_keel(dir, "train --model probe --steps 6 --rules probe.dense=momentum:0.5");
  REQUIRE_MESSAGE(plain.status == 0, plain.err);
  REQUIRE_MESSAGE(ruled.status == 0, ruled.err);
  auto sha = [](const std::string& out) {
    auto at = out.find("params_sha256 ");
    return at == std::string::npos ? std::string() : out.substr(at + 14, 64);
  };
  CHECK(!sha(plain.out).empty());
  CHECK(sha(ruled.out) != sha(plain.out));
  auto unknown = run_keel(dir, "train --model probe --steps 6 --rules fc1.weight=adam");
  CHECK(unknown.status != 0);
  CHECK_MESSAGE(has(unknown.err, "an update rule for \"fc1.weight\", which probe does not have"), unknown.err);
}

TEST_CASE("how the workers' gradients combine is part of a run's identity and of its result") {
  temp_dir dir;
  std::vector<std::string> hashes, shas;
  for (const char* combine : {"sum", "mean", "sum"}) {
    auto store = (dir.path() / ("ck-" + std::to_string(hashes.size()))).string();
    auto r = run_keel(dir, std::string("train --model ctr-lr --train-limit 3000 --test-limit 200 --steps 6 ") +
                               "--checkpoint-every 3 --combine " + combine + " --checkpoint-dir " + store);
    REQUIRE_MESSAGE(r.status == 0, r.err);
    hashes.push_back(configuration_in(dir, store));
    auto at = r.out.find("params_sha256 ");
    REQUIRE(at != std::string::npos);
    shas.push_back(r.out.substr(at, 78));
  }
  CHECK(hashes[0] != hashes[1]);
  CHECK(hashes[0] == hashes[2]);
  CHECK(shas[0] != shas[1]);
  CHECK(shas[0] == shas[2]);
}

TEST_CASE("keel plot refuses a report that is not a regular file at once, exit 2, without reading it") {
  temp_dir dir;
  auto d = dir.path().string();
  auto fifo = dir.path() / "pipe.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // `timeout` bounds the old behaviour (reading /dev/zero for ever, or
  // blocking in open() on a FIFO with no writer): 124 is a failure here.
  for (auto file : {std::string("/dev/zero"), fifo.string()}) {
    CAPTURE(file);
    auto r = run_keel(dir, "plot " + file + " -o " + d + "/x.svg", "timeout 20 ");
    CAPTURE(r.err);
    CHECK(r.status == 2);
    CHECK(lines(r.err) == 1);
    CHECK(has(r.err, "keel plot: " + file + ": not a regular file"));
    CHECK(!std::filesystem::exists(dir.path() / "x.svg"));
  }
}

TEST_CASE("keel train refuses before training: output paths, impossible batches, plan targets, conflicting flags") {
  temp_dir dir;
  auto d = dir.path().string();
  const std::pair<std::string, std::string> cases[] = {
    {"train --model probe --steps 10 --report " + d + "/missing/r.json",
     "keel train: --report: '" + d + "/missing/r.json': directory '" + d + "/missing' does not exist"},
    {"train --model probe --steps 10 --plot " + d + "/missing/r.svg", "keel train: --plot: "},
    {"train --model probe --steps 10 --report " + d, "is a directory; name a file"},
    {"train --model sparse-lr --batch 1000000",
     "keel train: batch 1000000 with 2 workers leaves no full batch in "},
    {"train --model probe --steps 10 --faults kill:shard:99@10", "keel train: --faults: fault 'kill:shard:99@10': the job has no shard:99"},
    {"train --model probe --steps 10 --faults kill9:node:0@5", "keel train: --faults: fault 'kill9:node:0@5': the job has no nodes"},
    {"train --model probe --steps 10 --kill worker:7@5", "keel train: --kill: "},
    {"train --model probe --steps 10 --fault-rate 3", "keel train: --fault-rate: only shapes --random-faults"},
    {"train --model probe --steps 10 --fault-mix kills", "keel train: --fault-mix: only shapes --random-faults"},
    {"train --model probe --steps 10 --quiet --verbose", "keel train: --quiet: and --verbose contradict each other"},
    {"train --model probe --steps 10 --faults ''", "keel train: --faults: empty"},
    {"train --model ctr-lr --steps 10 --scorers nobody", "keel train: --scorers: 'nobody': say workers or coordinator"},
    {"cluster --nodes 1 --shards x", "keel cluster: --shards: 'x' is not a number (see keel cluster --help)"},
    {"cluster --nodes 0", "keel cluster: --nodes: '0' is not a number in 1..64"},
    {"cluster --nodes 2 --faults partition:node:1@5+100ms", "keel cluster: partition, split and oneway need --node-fault-command"},
    {"cluster --nodes 2 --model probe --steps 10 --faults kill:shard:99@10", "keel cluster: --faults: "},
  };
  for (auto& [arguments, expected] : cases) {
    CAPTURE(arguments);
    auto r = run_keel(dir, arguments);
    CAPTURE(r.err);
    CAPTURE(r.out);
    CHECK(r.status == 2);
    CHECK(lines(r.err) == 1);
    CHECK(has(r.err, expected));
    CHECK_FALSE(has(r.out, "checkpoints in"));  // refused before a temp dir or a job
    CHECK_FALSE(has(r.err, "--resume"));
    CHECK_FALSE(has(r.out, "keel cluster: node:"));  // no node started
  }
}

TEST_CASE("keel train names a --train-limit that leaves no full batch at start, leaving nothing behind") {
  temp_dir dir;
  auto r = run_keel(dir, "train --model mnist-softmax --train-limit 1");
  CAPTURE(r.err);
  CHECK(r.status == 2);
  CHECK(lines(r.err) == 1);
  CHECK(has(r.err, "keel train: batch 32 with 2 workers leaves no full batch in 1 example (--train-limit 1)"));
  CHECK(r.out.empty());
}

TEST_CASE("keel cluster --connect names itself, not keel train, when the nodes cannot be reached") {
  temp_dir dir;
  auto secret = dir.path() / "secret";
  std::ofstream(secret) << "0123456789abcdef0123456789abcdef\n";
  auto r = run_keel(dir, "cluster --connect 127.0.0.1:1 --secret-file " + secret.string() +
                           " --model probe --steps 10 --quiet");
  CAPTURE(r.err);
  CHECK(r.status != 0);
  CHECK(has(r.err, "keel cluster: "));
  CHECK_FALSE(has(r.err, "keel train:"));
}
