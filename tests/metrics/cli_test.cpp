// `keel train --metrics-*` end to end: the real binary (KEEL_CLI_PATH),
// scraped with curl while it trains, and its JSON-lines file read back.
#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "../actors/job_fixture.hpp"
#include "cli_run.hpp"
#include "json_check.hpp"
#include "scrape.hpp"

extern char** environ;

using namespace keel;
using namespace keel::test;

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The metrics URL `keel train` printed, if it has yet.
std::string printed_url(const std::string& output) {
  const std::string prefix = "keel train: metrics on ";
  auto at = output.find(prefix + "http://127.0.0.1:");
  if (at == std::string::npos)
    return {};
  auto end = output.find('\n', at);
  if (end == std::string::npos)
    return {};  // the line is not complete yet
  auto url = output.substr(at + prefix.size(), end - at - prefix.size());
  auto port_at = std::string("http://127.0.0.1:").size();
  auto slash = url.find('/', port_at);
  if (slash == std::string::npos || url.substr(slash) != "/metrics")
    return {};
  auto port = url.substr(port_at, slash - port_at);
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) == 0)
    return {};
  return url;
}

// `keel train` run in the background, its output going to a file.
class background_keel {
 public:
  background_keel(const std::vector<std::string>& arguments, const std::filesystem::path& output)
      : output_(output) {
    std::vector<std::string> argv_text = {KEEL_CLI_PATH};
    argv_text.insert(argv_text.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawn(&pid_, KEEL_CLI_PATH, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    REQUIRE(rc == 0);
  }
  ~background_keel() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  std::string output() const { return read_file(output_); }

 private:
  std::filesystem::path output_;
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("keel train --metrics-port 0 serves live metrics that count the kill of shard:0") {
  // Fault: kill shard:0 at step 5 of a run far too long to end during the test.
  temp_dir dir;
  background_keel keel(
      {"train", "--model", "probe", "--steps", "2000000", "--quiet", "--faults", "kill:shard:0@5",
       "--checkpoint-dir", (dir.path() / "ckpt").string(), "--metrics-port", "0"},
      dir.path() / "out.txt");
  std::string url;
  REQUIRE_MESSAGE(wait_until([&] { return !(url = printed_url(keel.output())).empty(); },
                             std::chrono::seconds(60), std::chrono::milliseconds(20)),
                  keel.output());
  exposition e;
  bool restarted = wait_until(
      [&] {
        e = read_exposition(curl(url).body);
        return e.at("keel_restarts_total{actor=\"shard:0\"}") == 1.0;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20));
  CAPTURE(keel.output());
  CHECK(restarted);
  CHECK_MESSAGE(e.error.empty(), e.error);
  CHECK(e.at("keel_faults_injected_total{kind=\"kill\"}") == 1);
  CHECK(e.at("keel_job_done") == 0);
  CHECK(e.at("keel_up") == 1);
}

TEST_CASE("idle connections to --metrics-port cannot starve keel train's checkpoints of descriptors, and /metrics still answers") {
  // keel train runs with 256 descriptors, as a small ulimit would give it;
  // 400 idle connections to its metrics port would take them all (issue 19
  // saw checkpoints fail with EMFILE and /metrics stop answering).
  temp_dir dir;
  rlimit r{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &r) == 0);
  REQUIRE(r.rlim_max >= 1024);  // this process holds the 400 client ends
  auto old = r;
  r.rlim_cur = 256;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &r) == 0);
  background_keel keel({"train", "--model", "probe", "--steps", "2000000", "--quiet", "--checkpoint-every", "20",
                        "--checkpoint-dir", (dir.path() / "ckpt").string(), "--metrics-port", "0"},
                       dir.path() / "out.txt");
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
  if (old.rlim_cur < 1024) {
    r.rlim_cur = 1024;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &r) == 0);
  }
  std::string url;
  REQUIRE_MESSAGE(wait_until([&] { return !(url = printed_url(keel.output())).empty(); }, std::chrono::seconds(60),
                             std::chrono::milliseconds(20)),
                  keel.output());
  auto port = static_cast<uint16_t>(std::stoul(url.substr(std::string("http://127.0.0.1:").size())));
  std::vector<int> idle;
  for (int i = 0; i < 400; ++i) idle.push_back(connect_loopback(port));
  CAPTURE(keel.output());
  CHECK(wait_until([&] { return keel.output().find("connections are open (the limit)") != std::string::npos; },
                   std::chrono::seconds(20)));
  // While every idle connection is held, checkpoints go on being committed
  // and none fails; the page still answers (a scrape gets the slot of an
  // idle connection, or waits its turn in the backlog behind them; one
  // refused for want of descriptors is retried).
  auto scrape = [&](exposition& e) {
    auto [out, status] = run_process("curl -sS --max-time 5 '" + url + "' 2>/dev/null");
    e = read_exposition(out);
    return status == 0 && e.at("keel_checkpoints_total").has_value();
  };
  exposition first;
  REQUIRE(wait_until([&] { return scrape(first); }, std::chrono::seconds(30), std::chrono::milliseconds(50)));
  exposition later;
  CHECK(wait_until(
    [&] { return scrape(later) && *later.at("keel_checkpoints_total") >= *first.at("keel_checkpoints_total") + 5; },
    std::chrono::seconds(30), std::chrono::milliseconds(50)));
  CHECK(later.at("keel_checkpoint_failures_total") == 0.0);
  CHECK(keel.output().find("Too many open files") == std::string::npos);
  for (int fd : idle) ::close(fd);
}

TEST_CASE(
    "keel train --metrics-file appends valid JSON lines, the last with the result's numbers") {
  // Fault: kill shard:0 at step 20 of 200 (probe, BSP, 2 shards, 2 workers).
  temp_dir dir;
  auto file = dir.path() / "metrics.jsonl";
  auto report = dir.path() / "report.json";
  auto [out, status] = run_process(
      std::string(KEEL_CLI_PATH) +
      " train --model probe --steps 200 --quiet --faults kill:shard:0@20" + " --checkpoint-dir " +
      (dir.path() / "ckpt").string() + " --metrics-port 0 --metrics-file " + file.string() +
      " --metrics-every-ms 2 --report " + report.string() + " 2>&1");
  CAPTURE(out);
  REQUIRE(status == 0);
  CHECK(!printed_url(out).empty());
  auto lines = lines_of(read_file(file));
  REQUIRE(!lines.empty());
  double last_time = 0;
  for (auto& line : lines) {
    CAPTURE(line);
    auto j = parse_json(line);
    REQUIRE(j);
    CHECK((*j)["keel_up"].number == 1);
    CHECK((*j)["time_ms"].number >= last_time);
    last_time = (*j)["time_ms"].number;
  }
  auto last = parse_json(lines.back());
  auto result = parse_json(read_file(report));
  REQUIRE(result);
  CHECK((*last)["keel_job_done"].number == 1);
  CHECK((*last)["keel_restarts_total"]["shard:0"].number ==
        (*result)["restarts"]["shard:0"].number);
  CHECK((*result)["restarts"]["shard:0"].number >= 1);
  CHECK((*last)["keel_pushes_applied_total"].number == (*result)["pushes_applied"].number);
  CHECK((*last)["keel_pushes_total"].number == (*result)["pushes_acked"].number);
  CHECK((*last)["keel_checkpoints_total"].number == (*result)["checkpoints"].number);
  CHECK((*last)["keel_steps"].number == 200);
}

TEST_CASE("bad metrics flags are usage errors naming the flag or the file") {
  temp_dir dir;
  auto run = [&](const std::string& flags) {
    return run_process(std::string(KEEL_CLI_PATH) + " train --model probe --steps 5 --quiet " +
                       "--checkpoint-dir " + (dir.path() / "ckpt").string() + " " + flags +
                       " 2>&1");
  };
  struct bad_case {
    std::string flags, says;
  };
  for (auto& c : std::vector<bad_case>{
           {"--metrics-port 70000", "--metrics-port: '70000' is too large (at most 65535)"},
           {"--metrics-port -1", "--metrics-port: '-1' is negative"},
           {"--metrics-port 0 --metrics-address nowhere",
            "metrics address 'nowhere' is not an IP address"},
           {"--metrics-file /nonexistent-dir/m.jsonl",
            "metrics file /nonexistent-dir/m.jsonl: cannot open"},
           {"--metrics-file m.jsonl --metrics-every-ms 0",
            "--metrics-every-ms: '0' is too small (at least 1)"},
       }) {
    CAPTURE(c.flags);
    auto [out, status] = run(c.flags);
    CAPTURE(out);
    CHECK(status == 2);
    CHECK(out.find("keel train: " + c.says) != std::string::npos);
  }
}
