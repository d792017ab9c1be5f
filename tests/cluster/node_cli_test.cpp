// `keel node` as a command: the secret it needs, and how it stops.
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>

#include "actors/data_plane/data_plane_wire.hpp"
#include "cluster_fixture.hpp"
#include "cluster_run.hpp"

using namespace keel;
using namespace keel::test;
using namespace std::chrono_literals;

namespace {

constexpr auto patience = 10s;

// Runs `keel node ARGS` to its end; its exit status and log.
std::pair<std::optional<int>, std::string> run_to_exit(const std::vector<std::string>& args) {
  auto p = node_process::launch(args);
  auto status = p->wait_exit(patience);
  return {status, p->log()};
}

}  // namespace

TEST_CASE("keel node refuses a missing, empty, short or absent cluster secret with exit 2 naming it") {
  auto dir = make_temp_dir();
  ::unsetenv("KEEL_CLUSTER_SECRET");
  auto check = [&](std::vector<std::string> args, const std::string& text) {
    auto [status, log] = run_to_exit(args);
    CHECK_MESSAGE(status == 2, log);
    CHECK_MESSAGE(log.find(text) != std::string::npos, log);
  };
  check({"--secret-file", (dir / "missing").string()}, "cluster secret file " + (dir / "missing").string() + " does not exist");
  check({"--secret-file", write_secret(dir, "empty", "")}, "is empty");
  check({"--secret-file", write_secret(dir, "short", "tiny")}, "holds 4 bytes; a cluster secret needs at least 16");
  check({"--secret-file", dir.string()}, "is a directory");
  check({}, "no cluster secret: pass --secret-file FILE or set KEEL_CLUSTER_SECRET");
  check({"--listen", "127.0.0.1:99999", "--secret-file", write_secret(dir, "ok", "0123456789abcdef0123")},
        "--listen '127.0.0.1:99999': port is above 65535");
  std::filesystem::remove_all(dir);
}

TEST_CASE("keel node, cluster and admin refuse a secret file that is a device, a FIFO or larger than 64 KiB, unread, exit 2") {
  auto dir = make_temp_dir();
  ::unsetenv("KEEL_CLUSTER_SECRET");
  auto fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto large = write_secret(dir, "large", std::string(max_secret_file_bytes + 1, 'k'));
  const std::vector<std::pair<std::string, std::string>> files = {
    {"/dev/zero", "/dev/zero: not a regular file (it is a character device)"},
    {fifo.string(), fifo.string() + ": not a regular file (it is a FIFO)"},
    {large, large + ": larger than " + std::to_string(max_secret_file_bytes) + " bytes"}};
  for (auto& [file, why] : files) {
    CAPTURE(file);
    auto [status, log] = run_to_exit({"--secret-file", file});
    CHECK_MESSAGE(status == 2, log);
    CHECK_MESSAGE(log.find("cluster secret file " + why) != std::string::npos, log);
    // The other commands that take a secret read it the same way.
    for (auto command : {"cluster --connect 127.0.0.1:1 --model probe --secret-file " + file,
                         "admin --at 127.0.0.1:1 --secret-file " + file + " status"}) {
      auto r = run_keel(command);
      CHECK_MESSAGE(r.status == 2, r.out);
      CHECK_MESSAGE(r.out.find("cluster secret file " + why) != std::string::npos, r.out);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("keel node takes its secret from KEEL_CLUSTER_SECRET and stops with exit 0 when standard input ends") {
  cluster_fixture f;
  ::setenv("KEEL_CLUSTER_SECRET", f.secret_text.c_str(), 1);
  auto n = node_process::start({"--exit-on-stdin-eof"});
  ::unsetenv("KEEL_CLUSTER_SECRET");
  auto h = f.connect(*n);  // authenticates with the fixture's secret
  CHECK(h.node == n->node_id());
  n->close_stdin();
  CHECK_MESSAGE(n->wait_exit(patience) == 0, n->log());
}

TEST_CASE("keel node announces its data plane, and one whose data port is taken exits 1 naming the address") {
  auto dir = make_temp_dir();
  ::unsetenv("KEEL_CLUSTER_SECRET");
  auto secret = write_secret(dir, "ok", "0123456789abcdef0123");
  uint16_t port = 0;
  auto holder = dp::listen_on("127.0.0.1", port);
  REQUIRE(holder);
  auto [status, log] = run_to_exit({"--secret-file", secret, "--data-port", std::to_string(port)});
  CHECK_MESSAGE(status == 1, log);
  CHECK_MESSAGE(log.find("data plane: cannot listen on 127.0.0.1:" + std::to_string(port)) != std::string::npos, log);
  auto [off_status, off_log] = run_to_exit({"--secret-file", secret, "--no-data-plane", "--data-port", "x"});
  CHECK_MESSAGE(off_status == 2, off_log);  // a bad flag is still a bad flag
  std::filesystem::remove_all(dir);
  cluster_fixture f;
  auto n = f.start_node();
  auto line = n->wait_stdout("keel node: data plane on 127.0.0.1:", patience);
  CHECK_MESSAGE(line, n->log());
}
