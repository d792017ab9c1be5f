// `keel cluster` end to end: real `keel node` processes on 127.0.0.1 with
// OS-picked ports, whole processes lost to real signals (SIGKILL, SIGSTOP
// past the connection timeout, SIGSTOP then SIGCONT), a node restarted on
// its port, and a coordinator killed with SIGKILL and resumed. Every run
// must end with every acknowledged push applied exactly once and, under BSP,
// with the params_sha256 of the same run in one process without faults.
#include <algorithm>
#include <fstream>
#include <map>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "actors/cluster/cluster_placement.hpp"
#include "actors/job/placed_job.hpp"
#include "cluster_fixture.hpp"
#include "cluster_run.hpp"
#include "keel_output.hpp"
#include "killed_run.hpp"
#include "models/model_registry.hpp"
#include "test_tier.hpp"

using namespace keel;
using namespace keel::test;
using namespace std::chrono_literals;

namespace {

using run_result = keel_run;

}  // namespace

TEST_CASE("a 2-node cluster loses the node of shard:1 to kill -9 mid-run and ends bit-identical") {
  const std::string train = "--model probe --steps 300 --checkpoint-every 20";
  auto sha = reference_sha(train);
  auto r = run_keel("cluster --nodes 2 " + train + " --kill node:1@150");
  check_promises(r, sha);
  // The kill was injected, the node's death seen, and its children (shard:1,
  // worker:1) were started again on node:0.
  check_injected_then_lost(r, "kill9:node:1@150", "node:1");
  CHECK_MESSAGE(r.out.find("spawned shard 'shard:1' (incarnation 2)") != std::string::npos, r.out);
  // Its recovery is summed up (children restarted elsewhere, or a rollback
  // when a restarted worker lacked pushes a restored shard needed).
  auto line_at = r.out.find("  node:1 kill9:node:1@150: the node's process killed with SIGKILL at");
  REQUIRE_MESSAGE(line_at != std::string::npos, r.out);
  auto line = r.out.substr(line_at, r.out.find('\n', line_at) - line_at);
  CHECK_MESSAGE(line.find("serving again after") != std::string::npos, line);
}

TEST_CASE("pushes and pulls between nodes go over the nodes' data planes, bit-identical to a run over CAF's middleman") {
  const std::string train = "--model probe --steps 300 --checkpoint-every 20";
  auto sha = reference_sha(train);
  auto over_plane = run_keel("cluster --nodes 3 " + train);
  check_promises(over_plane, sha);
  CHECK_MESSAGE(over_plane.out.find("keel node: data plane: connected to node") != std::string::npos, over_plane.out);
  // Every node prints what its data plane carried when it stops; the
  // shards' nodes took requests in.
  long carried_in = 0;
  for (size_t at = over_plane.out.find("data plane carried "); at != std::string::npos;
       at = over_plane.out.find("data plane carried ", at + 1))
    carried_in += number_after(over_plane.out.substr(at), " requests out and ");
  CHECK_MESSAGE(carried_in > 0, over_plane.out);
  auto over_caf = run_keel("cluster --nodes 3 --no-data-plane " + train);
  check_promises(over_caf, sha);
  CHECK_MESSAGE(over_caf.out.find("data plane") == std::string::npos, over_caf.out);
}

KEEL_RELEASE_TEST_CASE("a 3-node cluster with a node stopped (SIGSTOP) past the connection timeout ends bit-identical") {
  const std::string train = "--model probe --steps 300 --checkpoint-every 20";
  auto sha = reference_sha(train);
  auto r = run_keel("cluster --nodes 3 --node-timeout-ms 600 " + train + " --faults stop:node:0@150");
  check_promises(r, sha);
  // A stopped process closes no connection: only the timeout can find it.
  check_injected_then_lost(r, "stop:node:0@150", "node:0");
  CHECK_MESSAGE(r.out.find("spawned shard 'shard:0' (incarnation 2)") != std::string::npos, r.out);
}

KEEL_RELEASE_TEST_CASE("a node killed with kill -9 and started again on its port is used again, bit-identical") {
  const std::string train = "--model probe --steps 1500 --checkpoint-every 20";
  auto sha = reference_sha(train);
  // One node: its children can go nowhere else, so the run waits for the
  // node to come back and goes on there (with two, a fast run could end
  // on the other node before the lost one was back).
  auto r = run_keel("cluster --nodes 1 --respawn-nodes " + train + " --kill node:0@100");
  check_promises(r, sha);
  check_injected_then_lost(r, "kill9:node:0@100", "node:0");
  auto port = std::to_string(number_after(r.out, "node:0 listening on 127.0.0.1:"));
  // Below the kernel's ephemeral range, where no outgoing connection of any
  // process can take the port while the node is down.
  unsigned ephemeral = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral;
  CHECK_MESSAGE(std::stoul(port) < ephemeral, "node:0 listened on " << port << ", in the ephemeral range from "
                                                                      << ephemeral);
  // Announced back at the same address, after it was lost.
  auto down = r.out.find("node_down node:0");
  auto up = r.out.find("node_up node:0: back at 127.0.0.1:" + port);
  CHECK_MESSAGE(up != std::string::npos, r.out);
  CHECK(down < up);
}

TEST_CASE("a keel cluster job whose every node is lost for good fails after --node-wait-ms, naming why, instead of waiting forever") {
  // The same one-node job as above without --respawn-nodes: nothing brings
  // the node back. (It waited forever: its children's starts kept waiting
  // for a live node, within their supervisors' restart intensity.)
  auto run = node_process::launch({"--nodes", "1", "--node-wait-ms", "1000", "--model", "probe", "--steps", "1500",
                                   "--checkpoint-every", "20", "--kill", "node:0@100"},
                                  "cluster");
  auto exited = run->wait_exit(120s);
  REQUIRE_MESSAGE(exited, ("keel cluster still runs 120 s after its only node was lost for good:\n" + run->log()));
  CHECK(*exited == 1);
  auto log = run->log();
  CHECK_MESSAGE(log.find("on any node (none has taken children for ") != std::string::npos, log);
  CHECK_MESSAGE(log.find("every node of the job is lost or draining (keel cluster --node-wait-ms)") != std::string::npos,
                log);
}

TEST_CASE("a node cut off (SIGSTOP, then SIGCONT after the timeout) drops its stale actors and rejoins") {
  const std::string train = "--model probe --steps 1500 --checkpoint-every 20";
  auto sha = reference_sha(train);
  // node:0 holds shard:0 and worker:1: both supervisors restart at once.
  auto r = run_keel("cluster --nodes 3 " + train + " --faults cut:node:0@100+1200ms");
  check_promises(r, sha);
  check_injected_then_lost(r, "cut:node:0@100+1200ms", "node:0");
  auto up = r.out.find("node_up node:0: back at");
  CHECK_MESSAGE(up != std::string::npos, r.out);
  CHECK(r.out.find("node_down node:0: lost") < up);
  // Back from its stop, the node finds the job gone from its connection and
  // stops the actors the job has already restarted elsewhere.
  CHECK_MESSAGE(r.out.find("stopping its") != std::string::npos, r.out);
}

KEEL_RELEASE_TEST_CASE("a coordinator killed with kill -9 resumes on the same nodes with --connect and --resume, bit-identical") {
  cluster_fixture f;
  auto n0 = f.start_node();
  auto n1 = f.start_node();
  const std::string train = "--model probe --steps 4000 --checkpoint-every 10";
  auto sha = reference_sha(train);
  auto connect = f.connect_flags({n0.get(), n1.get()});
  auto dir = (f.dir / "run").string();

  // Each node stops the dead job's actors once it loses the coordinator.
  f.kill9_coordinator_after_checkpoints(KEEL_BINARY, connect, train, dir, 3, {n0.get(), n1.get()});

  auto r = run_keel("cluster " + connect + " --resume " + dir);
  check_promises(r, sha);
  // It continued from a checkpoint of the killed run, not from step 0.
  CHECK(number_after(r.out, "rollbacks, resumed at step ") >= 30);
  // The nodes served both coordinators and are still up.
  CHECK(!n0->wait_exit(0ms));
  CHECK(!n1->wait_exit(0ms));
}

namespace {

// Seeds first..last of the node-fault chaos tier: 3 nodes restarted after
// kill -9 (--respawn-nodes); each plan holds about four faults drawn from
// the seed: node faults (kill9, one stop at most, cuts of 200..1500 ms) and
// kills of shards, workers, the checkpointer and supervisors.
injected_faults node_fault_chaos(int first, int last) {
  return seeded_cluster_chaos("--model probe --steps 400 --checkpoint-every 20", "kills,supervisors,nodes", first,
                              last);
}

// Each quarter injected every kind of node fault, and plenty of faults.
// Four quarters of five seeds, so that each stays well inside CTest's
// timeout on a slow machine and under ASan (a run takes 2 to 6 s here,
// 10 to 30 s under ASan).
void check_node_fault_mix(const injected_faults& all) {
  CHECK(all.kill9 >= 1);
  CHECK(all.stop >= 1);
  CHECK(all.cut >= 1);
  CHECK(all.node_faults() >= 4);
  CHECK(all.actor_kills >= 5);
}

}  // namespace

TEST_CASE("chaos over node faults: seeded plans 1 to 5 of kill -9, SIGSTOP, cuts and actor kills, each bit-identical") {
  check_node_fault_mix(node_fault_chaos(1, 5));
}

KEEL_RELEASE_TEST_CASE("chaos over node faults: seeded plans 6 to 10 of kill -9, SIGSTOP, cuts and actor kills, each bit-identical") {
  check_node_fault_mix(node_fault_chaos(6, 10));
}

KEEL_RELEASE_TEST_CASE("chaos over node faults: seeded plans 11 to 15 of kill -9, SIGSTOP, cuts and actor kills, each bit-identical") {
  check_node_fault_mix(node_fault_chaos(11, 15));
}

KEEL_RELEASE_TEST_CASE("chaos over node faults: seeded plans 16 to 20 of kill -9, SIGSTOP, cuts and actor kills, each bit-identical") {
  check_node_fault_mix(node_fault_chaos(16, 20));
}

TEST_CASE("keel cluster refuses a bad --connect, node faults with --connect, and a wrong secret, naming each") {
  cluster_fixture f;
  auto n0 = f.start_node();
  auto at = "127.0.0.1:" + std::to_string(n0->port());

  // A bad training flag is refused before any node starts.
  auto bad_flag = run_keel("cluster --nodes 2 --model probe --steps 10 --bogus");
  CHECK(bad_flag.status == 2);
  CHECK_MESSAGE(bad_flag.out.find("--bogus: unknown flag") != std::string::npos, bad_flag.out);
  CHECK_MESSAGE(bad_flag.out.find("listening on") == std::string::npos, bad_flag.out);

  auto bad_address = run_keel("cluster --connect 127.0.0.1:99999 --model probe --steps 10");
  CHECK(bad_address.status == 2);
  CHECK_MESSAGE(bad_address.out.find("'127.0.0.1:99999' is not HOST:PORT") != std::string::npos, bad_address.out);

  auto node_fault = run_keel("cluster --connect " + at + " --secret-file " + f.secret_file +
                             " --model probe --steps 10 --kill node:0@5");
  CHECK(node_fault.status == 2);
  CHECK_MESSAGE(node_fault.out.find("node faults (node:N) need nodes this keel cluster started") !=
                  std::string::npos,
                node_fault.out);

  auto no_secret = run_keel("cluster --connect " + at + " --model probe --steps 10");
  CHECK(no_secret.status == 2);
  CHECK_MESSAGE(no_secret.out.find("no cluster secret") != std::string::npos, no_secret.out);

  auto wrong = write_secret(f.dir, "wrong", "not-the-cluster-secret-at-all-0123");
  auto refused = run_keel("cluster --connect " + at + " --secret-file " + wrong + " --model probe --steps 10");
  CHECK(refused.status == 1);
  CHECK_MESSAGE(refused.out.find("did not prove the cluster secret") != std::string::npos, refused.out);
  CHECK(!n0->wait_exit(0ms));  // the node serves on
  // A job that never began ends at once: its coordinator does not wait for
  // a beginning that will not come (it waited a minute for it).
  auto unreachable = node_process::launch(
    {"--connect", "127.0.0.1:1", "--secret-file", f.secret_file, "--model", "probe", "--steps", "10", "--quiet"},
    "cluster");
  auto exited = unreachable->wait_exit(20s);
  REQUIRE_MESSAGE(exited, "keel cluster did not exit after failing to reach its node");
  CHECK(*exited == 1);
}

TEST_CASE("a job over nodes refuses node faults nothing would carry out, before it connects to any node") {
  // No node listens at port 1: the refusal must come from the plan alone.
  cluster_fixture f;
  cluster_placement_config pc;
  pc.nodes = {{"127.0.0.1", 1, {}}};
  pc.secret = f.secret;
  pc.model.name = "probe";
  placed_job_config c;
  c.training_model = *make_model("probe", model_options{});
  c.checkpoints.dir = f.dir / "run";
  c.training.steps = 20;
  c.placement = std::make_shared<cluster_placement>(pc);
  c.faults.plan = *parse_fault_plan("kill9:node:0@5");
  auto j = start_job(c);
  REQUIRE(!j);
  CHECK_MESSAGE(describe(j.error()).find("'kill9:node:0@5': nothing carries out node faults here") !=
                  std::string::npos,
                describe(j.error()));
}

namespace {

// The keel-cluster-* directories in /tmp that hold a cluster.secret.
std::set<std::filesystem::path> cluster_secret_dirs() {
  std::set<std::filesystem::path> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/tmp", ec))
    if (e.path().filename().string().rfind("keel-cluster-", 0) == 0 &&
        std::filesystem::exists(e.path() / "cluster.secret", ec))
      out.insert(e.path());
  return out;
}

}  // namespace

TEST_CASE("keel cluster's secret is created 0600, and after the coordinator's kill -9 the next keel cluster removes it") {
  auto before = cluster_secret_dirs();
  cluster_fixture f;
  auto ckpt = f.dir / "run";
  std::vector<std::string> argv_s = {KEEL_BINARY, "cluster", "--nodes", "1", "--model", "probe", "--steps",
                                     "100000000", "--checkpoint-every", "10", "--checkpoint-dir",
                                     ckpt.string(), "--quiet"};
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
  bool running = wait_until([&] { return committed_checkpoints(ckpt) >= 1; }, 60s, 5ms);
  std::vector<std::filesystem::path> made;
  for (auto& d : cluster_secret_dirs())
    if (!before.count(d))
      made.push_back(d);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(running);
  REQUIRE(made.size() >= 1);
  // Whichever of the new ones is this coordinator's: it is still there.
  std::filesystem::path mine;
  for (auto& d : made) {
    std::ifstream lock(d / "keel.lock");
    std::string text((std::istreambuf_iterator<char>(lock)), {});
    if (text.find("pid " + std::to_string(pid) + " ") != std::string::npos)
      mine = d;
  }
  REQUIRE_MESSAGE(!mine.empty(), "no new keel-cluster-* directory names pid " << pid);
  auto perms = std::filesystem::status(mine / "cluster.secret").permissions();
  CHECK((perms & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK(std::filesystem::exists(mine / "cluster.secret"));

  auto next = run_keel("cluster --nodes 1 --model probe --steps 20 --quiet");
  REQUIRE_MESSAGE(next.status == 0, next.out);
  CHECK_MESSAGE(!std::filesystem::exists(mine), mine << " was left behind");
}

namespace {

// keel train's line of test figures, up to its timing ("test accuracy ...
// over N examples").
std::string test_figures(const std::string& out) {
  auto lines = lines_with(out, "keel train: test ");
  REQUIRE_MESSAGE(lines.size() == 1, out);
  return lines[0].substr(0, lines[0].find(", scored in"));
}

}  // namespace

TEST_CASE("workers on 3 nodes score ctr-fm's held-out slices, equal bit for bit to the coordinator scoring them in one process") {
  const std::string train =
    "--model ctr-fm --train-limit 4096 --test-limit 10000 --steps 60 --checkpoint-every 20 --quiet";
  auto reference = run_keel("train " + train + " --scorers coordinator");
  REQUIRE_MESSAGE(reference.status == 0, reference.out);
  CHECK_MESSAGE(reference.out.find("slices scored in the run: coordinator 3\n") != std::string::npos,
                reference.out);
  for (std::string plane : {"", "--no-data-plane "}) {
    CAPTURE(plane);
    auto r = run_keel("cluster --nodes 3 " + plane + train + " --scorers workers");
    REQUIRE_MESSAGE(r.status == 0, r.out);
    CHECK(sha_in(r.out) == sha_in(reference.out));
    CHECK(test_figures(r.out) == test_figures(reference.out));
    // Every slice scored by a worker, none by the coordinator.
    auto scored = lines_with(r.out, "slices scored in the run: ");
    REQUIRE_MESSAGE(scored.size() == 1, r.out);
    CHECK_MESSAGE(scored[0].find("coordinator") == std::string::npos, r.out);
    CHECK_MESSAGE(scored[0].find("slices scored in the run: worker:") != std::string::npos, r.out);
  }
}
