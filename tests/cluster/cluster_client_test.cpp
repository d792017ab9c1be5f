// Clients of a cluster (keel::cluster_client, actors/cluster/cluster_client.hpp):
// a coordinator in this process, shards on `keel node` processes, and the
// workers' loops in a client (its own actor system, as another process
// would have) that joined a node. Each loop does what keel's worker does,
// so a BSP run must end bit-identical to keel's own workers in one process,
// and the additive probe must count every push once.
#include <thread>

#include <doctest/doctest.h>

#include "actors/cluster/cluster_client.hpp"
#include "actors/cluster/cluster_placement.hpp"
#include "actors/job/placed_job.hpp"
#include "cluster_fixture.hpp"
#include "job_fixture.hpp"
#include "model_loop.hpp"

namespace keel::test {
namespace {

model_options probe_options() {
  model_options mo;
  mo.probe.table_keys = 4;
  mo.probe.table_pool = 256;
  return mo;
}

cluster_placement_config client_placement(const cluster_fixture& f, const std::vector<const node_process*>& nodes,
                                          uint32_t workers) {
  cluster_placement_config pc;
  for (auto* n : nodes)
    pc.nodes.push_back({"127.0.0.1", n->port(), {}});
  pc.secret = f.secret;
  pc.model = {"probe", "", probe_options()};
  pc.client_workers = workers;
  pc.client_wait = std::chrono::seconds(60);
  return pc;
}

cluster_client_config client_of(const cluster_fixture& f, const node_process& join, std::vector<uint32_t> workers) {
  cluster_client_config cc;
  cc.join = {"127.0.0.1", join.port(), {}};
  cc.secret = f.secret;
  cc.workers = std::move(workers);
  cc.log = [](const std::string&) {};
  return cc;
}

}  // namespace

TEST_CASE("a client process's loops train a cluster job through shard and worker kills, bit-identical to keel's own workers") {
  cluster_fixture f;
  auto n0 = f.start_node();
  auto n1 = f.start_node();
  auto m = make_model("probe", probe_options());
  REQUIRE(m);
  temp_dir own_dir, dir;
  auto cfg = config_for(*m, dir, 60);
  auto plan = parse_fault_plan("kill:shard:0@12,kill:worker:1@25,kill:shard:1@37");
  REQUIRE_MESSAGE(plan, describe(plan.error()));
  cfg.faults.plan = *plan;
  cfg.application_loop = true;
  // The client joins node:1 before the job starts; the job finds it there.
  auto client = cluster_client::connect(client_of(f, *n1, {0, 1}));
  REQUIRE_MESSAGE(client, describe(client.error()));
  auto j = start_job(placed_job_config{cfg, std::make_shared<cluster_placement>(client_placement(f, {n0.get(), n1.get()}, 2)), {}});
  REQUIRE_MESSAGE(j, describe(j.error()));
  std::vector<loop_outcome> loops(2);
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      auto c = (*client)->client(w, patience);
      if (!c) {
        loops[w].error = c.error();
        return;
      }
      loops[w] = run_loop(*c, cfg);
    });
  for (auto& t : threads) t.join();
  for (uint32_t w = 0; w < 2; ++w)
    CHECK_MESSAGE(!loops[w].error, "worker:" << w << ": " << describe(loops[w].error));
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  auto released = (*client)->wait_released(patience);
  CHECK_MESSAGE(!released, describe(released));
  check_faults_fired(cfg, *r);
  check_exactly_once(cfg, *r);
  CHECK(r->restarts["shard:0"] >= 1);
  CHECK(r->restarts["worker:1"] >= 1);
  auto own = config_for(*m, own_dir, 60);
  auto clean = run(own);
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(r->params_sha256 == clean->params_sha256);
}

TEST_CASE("a client process killed mid-run is a worker lost: a new client takes its loop on at the step the shards say, every push applied once") {
  cluster_fixture f;
  auto n0 = f.start_node();
  auto m = make_model("probe", probe_options());
  REQUIRE(m);
  temp_dir own_dir, dir;
  auto cfg = config_for(*m, dir, 80);
  cfg.training.workers = 1;
  cfg.application_loop = true;
  auto pc = client_placement(f, {n0.get()}, 1);
  pc.settings.connection_timeout = std::chrono::milliseconds(800);
  auto first = cluster_client::connect(client_of(f, *n0, {0}));
  REQUIRE_MESSAGE(first, describe(first.error()));
  auto j = start_job(placed_job_config{cfg, std::make_shared<cluster_placement>(pc), {}});
  REQUIRE_MESSAGE(j, describe(j.error()));
  // The first client runs steps 0..29 and leaves without a word (its
  // destructor takes the running worker down as a failure, as a dead
  // process's lost connection does).
  {
    auto c = (*first)->client(0, patience);
    REQUIRE_MESSAGE(c, describe(c.error()));
    app_model app(cfg, 0);
    auto s = c->next_step().wait(patience);
    while (s && *s < 30) {
      auto keys = app.keys_at(*s);
      REQUIRE(keys);
      auto p = c->pull(*s, *keys).wait(patience);
      REQUIRE_MESSAGE(p, describe(p.error()));
      auto g = app.gradient(*c, **p);
      REQUIRE(g);
      REQUIRE(c->push(*s, std::move(*g)).wait(patience));
      s = c->next_step().wait(patience);
    }
    first->reset();
  }
  auto second = cluster_client::connect(client_of(f, *n0, {0}));
  REQUIRE_MESSAGE(second, describe(second.error()));
  auto c = (*second)->client(0, patience);
  REQUIRE_MESSAGE(c, describe(c.error()));
  auto resumed = c->next_step().wait(patience);
  REQUIRE_MESSAGE(resumed, describe(resumed.error()));
  CHECK(*resumed <= 30);  // what the shards acknowledged of the first client's steps, or where a checkpoint put it
  auto loop = run_loop(*c, cfg);
  CHECK_MESSAGE(!loop.error, describe(loop.error));
  auto r = (*j)->wait(std::chrono::minutes(2));
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->restarts["worker:0"] >= 1);
  check_exactly_once(cfg, *r);
  auto own = config_for(*m, own_dir, 80);
  own.training.workers = 1;
  auto clean = run(own);
  REQUIRE_MESSAGE(clean, describe(clean.error()));
  CHECK(r->params_sha256 == clean->params_sha256);
}

TEST_CASE("a cluster job of the application's loops fails to begin, naming the worker, when no client runs its loop in time") {
  cluster_fixture f;
  auto n0 = f.start_node();
  auto m = make_model("probe", probe_options());
  REQUIRE(m);
  temp_dir dir;
  auto cfg = config_for(*m, dir, 20);
  auto pc = client_placement(f, {n0.get()}, 2);
  pc.client_wait = std::chrono::milliseconds(1500);
  SUBCASE("the job must say it runs the application's loops") {
    auto j = start_job(placed_job_config{cfg, std::make_shared<cluster_placement>(pc), {}});
    REQUIRE(!j);
    CHECK_MESSAGE(describe(j.error()).find("set job_config::application_loop") != std::string::npos,
                  describe(j.error()));
  }
  SUBCASE("clients of as many workers as the job has") {
    cfg.application_loop = true;
    cfg.training.workers = 3;
    auto j = start_job(placed_job_config{cfg, std::make_shared<cluster_placement>(pc), {}});
    REQUIRE(!j);
    CHECK_MESSAGE(describe(j.error()).find("the loops of 2 workers, and the job has 3") != std::string::npos,
                  describe(j.error()));
  }
  SUBCASE("a client serving worker:0 only") {
    cfg.application_loop = true;
    auto client = cluster_client::connect(client_of(f, *n0, {0}));
    REQUIRE_MESSAGE(client, describe(client.error()));
    auto j = start_job(placed_job_config{cfg, std::make_shared<cluster_placement>(pc), {}});
    REQUIRE(!j);
    CHECK_MESSAGE(describe(j.error()).find("no client process running the loop of worker:1 joined") !=
                    std::string::npos,
                  describe(j.error()));
  }
}

TEST_CASE("a cluster client refuses a wrong secret and bad configs, naming each") {
  cluster_fixture f;
  auto n0 = f.start_node();
  auto cc = client_of(f, *n0, {0});
  SUBCASE("no workers") {
    cc.workers.clear();
    auto c = cluster_client::connect(cc);
    REQUIRE(!c);
    CHECK(describe(c.error()).find("no workers") != std::string::npos);
  }
  SUBCASE("a worker twice") {
    cc.workers = {1, 1};
    auto c = cluster_client::connect(cc);
    REQUIRE(!c);
    CHECK(describe(c.error()).find("worker 1 is named twice") != std::string::npos);
  }
  SUBCASE("another secret") {
    cc.secret = *cluster_secret::from_bytes("another-secret-of-enough-length-0123456789", "test");
    cc.connect_timeout = std::chrono::seconds(3);
    auto c = cluster_client::connect(cc);
    REQUIRE(!c);
    CHECK(is(c.error(), errc::not_authenticated));
  }
  SUBCASE("a worker it does not run") {
    auto c = cluster_client::connect(cc);
    REQUIRE_MESSAGE(c, describe(c.error()));
    auto other = (*c)->client(3, std::chrono::milliseconds(100));
    REQUIRE(!other);
    CHECK(is(other.error(), errc::not_found));
    auto mine = (*c)->client(0, std::chrono::milliseconds(100));  // no job started it
    REQUIRE(!mine);
    CHECK(is(mine.error(), errc::timeout));
  }
}

TEST_CASE("a cluster client over TLS: certificates checked both ways, and a client of another CA refused") {
  // Certificates stating 127.0.0.1, as scripts/make-dev-certs.sh makes them
  // for an address: the coordinator reaches a client at the address it
  // joined from, so that is the name its certificate must state.
  auto certs = make_temp_dir();
  for (auto sub : {"ca", "other"}) {
    auto r = run_command(std::string("bash ") + KEEL_SCRIPTS_DIR + "/make-dev-certs.sh " + (certs / sub).string() +
                         " 127.0.0.1");
    REQUIRE_MESSAGE(r.status == 0, r.output);
  }
  auto files = [&](const std::string& sub) {
    return tls_files{(certs / sub / "127.0.0.1.pem").string(), (certs / sub / "127.0.0.1.key").string(),
                     (certs / sub / "ca.pem").string()};
  };
  auto ours = tls_context::load(files("ca"));
  REQUIRE_MESSAGE(ours, describe(ours.error()));
  cluster_fixture f;
  auto fl = files("ca");
  auto n0 = f.start_node({"--tls-cert", fl.cert, "--tls-key", fl.key, "--tls-ca", fl.ca});
  auto cc = client_of(f, *n0, {0});
  SUBCASE("a client of the cluster's CA trains") {
    cc.tls = *ours;
    auto client = cluster_client::connect(cc);
    REQUIRE_MESSAGE(client, describe(client.error()));
    auto m = make_model("probe", probe_options());
    REQUIRE(m);
    temp_dir dir;
    auto cfg = config_for(*m, dir, 20);
    cfg.training.workers = 1;
    cfg.application_loop = true;
    auto pc = client_placement(f, {n0.get()}, 1);
    pc.tls = *ours;
    auto j = start_job(placed_job_config{cfg, std::make_shared<cluster_placement>(pc), {}});
    REQUIRE_MESSAGE(j, describe(j.error()));
    auto c = (*client)->client(0, patience);
    REQUIRE_MESSAGE(c, describe(c.error()));
    auto loop = run_loop(*c, cfg);
    CHECK_MESSAGE(!loop.error, describe(loop.error));
    auto r = (*j)->wait(std::chrono::minutes(1));
    REQUIRE_MESSAGE(r, describe(r.error()));
    check_exactly_once(cfg, *r);
  }
  SUBCASE("a client whose certificate another CA signed is refused") {
    auto theirs = tls_context::load(files("other"));
    REQUIRE_MESSAGE(theirs, describe(theirs.error()));
    cc.tls = *theirs;
    cc.connect_timeout = std::chrono::seconds(3);
    auto client = cluster_client::connect(cc);
    REQUIRE(!client);
    CHECK_MESSAGE(describe(client.error()).find("cannot join the node at 127.0.0.1") != std::string::npos,
                  describe(client.error()));
  }
  std::error_code ec;
  std::filesystem::remove_all(certs, ec);
}

}  // namespace keel::test
