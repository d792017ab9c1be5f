// `keel node` as a command: the secret it needs, and how it stops.
#include <signal.h>

#include <cstdlib>

#include "cluster_fixture.hpp"

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
