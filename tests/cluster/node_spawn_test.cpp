// `keel node` processes on 127.0.0.1 serving this test process as their
// coordinator: actors spawned across processes, every shard message type
// crossing the process boundary, and the cluster secret and frame checks.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include <caf/io/all.hpp>

#include "actors/cluster/cluster_gate.hpp"
#include "actors/cluster/node_spawn.hpp"
#include "models/model.hpp"
#include "actors/core/atoms.hpp"
#include "actors/ps/snapshot_replica.hpp"
#include "cluster_fixture.hpp"
#include "push_builder.hpp"
#include "storage/sealed_file.hpp"
#include "storage/snapshot.hpp"
#include "supervision/directory.hpp"
#include "supervision/protocol.hpp"

using namespace keel;
using namespace keel::test;
using namespace std::chrono_literals;
using Status = schema::PushAck::Status;

namespace {

constexpr auto patience = 10s;

// Where the probe shards write their snapshots: absolute, as a node demands.
const std::filesystem::path& checkpoint_dir() {
  struct owned {
    std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("keel-node-spawn-" + std::to_string(::getpid()));
    owned() { std::filesystem::create_directories(path); }
    ~owned() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const owned dir;
  return dir.path;
}

parameter_shard_config probe_shard(const caf::actor& directory) {
  parameter_shard_config s;
  s.checkpoint_dir = checkpoint_dir().string();
  s.core.shard = 0;
  s.core.num_workers = 1;
  s.core.dense = {0, 4};
  s.core.sparse = {4, 4};
  s.core.rule = {consistency_kind::bsp, 0};
  s.core.optimizer.lr = 1.0f;
  s.initial_dense = {1, 2, 3, 4};
  s.snapshot_every_steps = 1;
  s.directory = directory;
  return s;
}

std::vector<float> pull_dense(caf::scoped_actor& self, const caf::actor& shard, uint64_t clock) {
  auto req = build<schema::PullRequest>(32, [&](schema::PullRequest::Builder b) {
    b.setClock(clock);
    auto r = b.initDense(1)[0];
    r.setBegin(0);
    r.setEnd(4);
  });
  std::vector<float> out;
  self->request(shard, patience, req)
    .receive(
      [&](const pull_reply_msg& m) {
        auto d = decode(m);
        REQUIRE_MESSAGE(d, describe(d.error()));
        auto values = d->root().getDense()[0].getValues();
        out.resize(values.size() / 4);
        std::memcpy(out.data(), values.begin(), values.size());
      },
      [&](caf::error& e) { FAIL(describe(e)); });
  return out;
}

// A frame with a well-formed segment table and garbage words: it parses as
// bytes and must be refused by the validating decoder.
heartbeat_msg garbage_heartbeat() {
  std::vector<uint8_t> bytes(8 + 64, 0xAB);
  uint32_t table[2] = {0, 8};  // one segment of 8 words
  std::memcpy(bytes.data(), table, sizeof table);
  auto f = frame::parse_copy(bytes.data(), bytes.size(), *buffer_pool::process_default());
  REQUIRE_MESSAGE(f, describe(f.error()));
  return heartbeat_msg(*f);
}

}  // namespace

TEST_CASE("a shard spawned on a node process serves pushes, pulls, snapshots and status to the coordinator") {
  cluster_fixture f;
  auto n1 = f.start_node();
  auto n2 = f.start_node({"--join", "127.0.0.1:" + std::to_string(n1->port())});
  REQUIRE_MESSAGE(n2->wait_stdout("joined node " + n1->node_id(), patience), n2->log());
  auto h1 = f.connect(*n1);
  auto h2 = f.connect(*n2);
  CHECK(h1.node == n1->node_id());

  // Each node lists the other as live.
  auto nodes = list_nodes(h1, patience);
  REQUIRE_MESSAGE(nodes, describe(nodes.error()));
  REQUIRE(nodes->size() == 2);
  CHECK((*nodes)[0].node == n1->node_id());
  CHECK((*nodes)[1].node == n2->node_id());
  CHECK((*nodes)[1].port == n2->port());
  CHECK(wait_until([&] { auto l = list_nodes(h2, patience); return l && l->size() == 2 && (*l)[1].node == n1->node_id(); }, patience));

  // The coordinator plays the shard's directory: the shard watches
  // "checkpointer" there and is told it is `sink`, in this process.
  caf::scoped_actor directory{*f.sys};
  caf::scoped_actor sink{*f.sys};
  auto shard = spawn_on(h1, make_spawn_request(probe_shard(directory)), patience);
  REQUIRE_MESSAGE(shard, describe(shard.error()));
  CHECK(to_string(shard->node()) == n1->node_id());
  bool watched = false;
  directory->receive(
    [&](supervision::watch_atom, const std::string& name) {
      watched = name == "checkpointer";
      directory->send(*shard, supervision::directory_update{name, 1, supervision::name_state::up, sink});
    },
    caf::after(patience) >> [] {});
  REQUIRE_MESSAGE(watched, "the remote shard did not watch the checkpointer's name");

  caf::scoped_actor self{*f.sys};
  auto push = make_push(0, 1, 0, 0, {1, 1, 1, 1});
  self->request(*shard, patience, push_msg(push.source()))
    .receive(
      [&](const push_ack_msg& m) {
        auto ack = decode(m);
        REQUIRE_MESSAGE(ack, describe(ack.error()));
        CHECK(ack->root().getSeq() == 1);
        CHECK((ack->root().getStatus() == Status::APPLIED || ack->root().getStatus() == Status::ACCEPTED));
      },
      [&](caf::error& e) { FAIL(describe(e)); });
  CHECK(pull_dense(self, *shard, 1) == std::vector<float>{0, 1, 2, 3});

  self->request(*shard, patience, status_atom::value, uint32_t{0})
    .receive([&](uint64_t received, uint64_t applied, uint64_t clock, uint64_t) {
               CHECK(received == 1);
               CHECK(applied == 1);
               CHECK(clock == 1);
             },
             [&](caf::error& e) { FAIL(describe(e)); });
  auto snap_req = build<schema::SnapshotRequest>(16, [](schema::SnapshotRequest::Builder b) { b.setCheckpoint(5); });
  self->request(*shard, patience, snap_req)
    .receive([&](const shard_snapshot_msg& m) { CHECK(decode(m)); }, [&](caf::error& e) { FAIL(describe(e)); });

  // The shard writes its periodic snapshot itself and reports its part (a
  // manifest of one entry) to the sink in this process; a shard restarted
  // from that file on the other node serves the same values.
  checkpoint_manifest_msg part;
  sink->receive([&](const checkpoint_manifest_msg& m) { part = m; },
                caf::after(patience) >> [] { FAIL("no part of a checkpoint reached the coordinator's sink"); });
  auto d = decode(part);
  REQUIRE(d);
  REQUIRE(d->root().getShards().size() == 1);
  auto e = d->root().getShards()[0];
  snapshot_ref ref{checkpoint_dir().string(), d->root().getCheckpoint(), d->root().getStep(),
                   manifest_entry{e.getShard(), e.getFile().cStr(), e.getBytes(), e.getCrc32c(), 0, 0, {}}, "", ""};
  CHECK(ref.checkpoint == 1);
  CHECK(std::filesystem::file_size(checkpoint_dir() / ref.entry.file) == ref.entry.bytes);
  auto restart = probe_shard(caf::actor{});
  restart.initial_dense.clear();
  auto damaged = ref;
  damaged.entry.crc32c ^= 1;  // not the file committed: refused, and the next candidate is read
  restart.restore_from = {damaged, ref};
  auto shard2 = spawn_on(h2, make_spawn_request(restart), patience);
  REQUIRE_MESSAGE(shard2, describe(shard2.error()));
  CHECK(to_string(shard2->node()) == n2->node_id());
  CHECK(pull_dense(self, *shard2, 1) == std::vector<float>{0, 1, 2, 3});

  auto status = status_of(h1, patience);
  REQUIRE(status);
  CHECK(status->children == 1);
  CHECK(status->spawned == 1);
  CHECK(status->refused == 0);
}

TEST_CASE("a node answers bad spawn requests (a kind it does not start, an id its config contradicts, bad config, NaN or infinite rates, unknown model, tables without their model) with named errors and starts nothing") {
  cluster_fixture f;
  auto n = f.start_node();
  auto h = f.connect(*n);
  auto expect_error = [&](const spawn_request& req, errc code, const std::string& text) {
    INFO("expected: " << text);
    auto r = spawn_on(h, req, patience);
    REQUIRE_FALSE(r);
    CHECK_MESSAGE(is(r.error(), code), describe(r.error()));
    CHECK_MESSAGE(describe(r.error()).find(text) != std::string::npos, describe(r.error()));
  };
  // A kind a node does not start, and one no build knows (bytes from a peer).
  auto unknown = make_spawn_request(probe_shard(caf::actor{}));
  unknown.id = actor_id::root();
  expect_error(unknown, errc::invalid_argument, "spawn_request.id: a node starts no 'root'");
  unknown.id.kind = static_cast<actor_kind>(200);
  expect_error(unknown, errc::invalid_argument, "a node starts no 'actor_kind(200)'");
  auto mislabelled = make_spawn_request(probe_shard(caf::actor{}));
  mislabelled.id = actor_id::shard(3);
  expect_error(mislabelled, errc::invalid_argument, "spawn_request.id: names shard:3 but its config is shard:0");
  auto no_workers = probe_shard(caf::actor{});
  no_workers.core.num_workers = 0;
  expect_error(make_spawn_request(no_workers), errc::invalid_argument, "shard.core.num_workers");
  // An elastic schedule for another number of workers than the shard's.
  auto other_workers = probe_shard(caf::actor{});
  auto three = worker_schedule::parse("leave:worker:2@5", 3, 10);
  REQUIRE(three);
  other_workers.core.workers = *three;
  other_workers.core.num_workers = 2;
  expect_error(make_spawn_request(other_workers), errc::invalid_argument,
               "shard.core.workers: 3 spans for 3 slots, the job has 2 workers");
  auto nan_lr = probe_shard(caf::actor{});
  nan_lr.core.optimizer.lr = std::nanf("");
  expect_error(make_spawn_request(nan_lr), errc::invalid_argument, "shard.core.optimizer.lr");
  // CAF 0.17's own float packing loops for ever on infinity; ours sends bits.
  auto inf_lr = probe_shard(caf::actor{});
  inf_lr.core.optimizer.lr = INFINITY;
  expect_error(make_spawn_request(inf_lr), errc::invalid_argument, "shard.core.optimizer.lr");
  // A shard with tables needs a model whose tables are its config's.
  auto with_tables = probe_shard(caf::actor{});
  with_tables.core.tables = {{"ctr.f0", 1}};
  expect_error(make_spawn_request(with_tables), errc::invalid_argument, "spawn_request.shard_model");
  expect_error(make_spawn_request(with_tables, 1, model_spec{"probe", "", {}}), errc::invalid_argument,
               "shard.core.tables: do not match the tables of model 'probe'");
  expect_error(make_spawn_request(with_tables, 1, model_spec{"resnet-9000", "", {}}), errc::not_found,
               "model 'resnet-9000' not found");
  caf::scoped_actor job{*f.sys};
  worker_spawn w;
  w.model.name = "resnet-9000";
  w.config.core.parts.resize(1);
  w.config.core.shard_names = {"shard:0"};
  w.config.directory = job;
  w.config.job = job;
  expect_error(make_spawn_request(w), errc::not_found, "model 'resnet-9000' not found");
  checkpointer_config c;
  c.dir = "relative/dir";
  c.job = job;
  expect_error(make_spawn_request(c), errc::invalid_argument, "checkpointer.dir");

  auto status = status_of(h, patience);
  REQUIRE(status);
  CHECK(status->spawned == 0);
  CHECK(status->rejected == 12);
  CHECK(status->children == 0);

  // Good requests still work (a worker builds its model by name on the
  // node), and the node stops cleanly on SIGTERM.
  c.dir = (f.dir / "checkpoints").string();
  auto cp = spawn_on(h, make_spawn_request(c), patience);
  REQUIRE_MESSAGE(cp, describe(cp.error()));
  w.model.name = "probe";
  w.model.options.probe.dense_keys = 4;
  w.config.core.parts[0].dense = {0, 4};
  w.config.core.parts[0].sparse = {4, 12};
  auto worker = spawn_on(h, make_spawn_request(w), patience);
  REQUIRE_MESSAGE(worker, describe(worker.error()));
  CHECK(to_string(worker->node()) == n->node_id());
  status = status_of(h, patience);
  REQUIRE(status);
  CHECK(status->children == 2);
  n->signal(SIGTERM);
  CHECK_MESSAGE(n->wait_exit(patience) == 0, n->log());
}

TEST_CASE("a peer with the wrong secret is refused, logged, and nothing is spawned for it") {
  cluster_fixture f;
  auto n = f.start_node();
  auto wrong = *cluster_secret::from_bytes("not-the-cluster-secret-at-all", "wrong");
  auto h = connect_node(*f.sys, "127.0.0.1", n->port(), wrong, patience);
  REQUIRE_FALSE(h);
  CHECK_MESSAGE(is(h.error(), errc::not_authenticated), describe(h.error()));

  // Past the gate (which a peer without the secret never passes, see
  // node_gate_test.cpp), the agent checks its own handshake: a wrong proof
  // there, then a spawn, are refused too.
  auto gated = connect_through_gate(*f.sys, "127.0.0.1", n->port(), f.secret, patience);
  REQUIRE_MESSAGE(gated, describe(gated.error()));
  auto agent = &gated->agent;
  caf::scoped_actor self{*f.sys};
  auto me = to_string(f.sys->node());
  auto challenge = random_bytes(32);
  auto join = [&](const hmac_digest* proof) {
    return build<schema::NodeJoin>(64, [&](schema::NodeJoin::Builder b) {
      b.setNode(me);
      b.setHost("127.0.0.1");
      b.setRole(schema::NodeJoin::Role::CLIENT);
      b.setChallenge(kj::arrayPtr(challenge.data(), challenge.size()));
      if (proof)
        b.setProof(kj::arrayPtr(proof->data(), proof->size()));
    });
  };
  std::vector<uint8_t> theirs;
  self->request(*agent, patience, hello_atom::value, join(nullptr))
    .receive([&](const node_join_msg& m) {
               auto c = decode(m)->root().getChallenge();
               theirs.assign(c.begin(), c.end());
             },
             [&](caf::error& e) { FAIL(describe(e)); });
  auto bad_proof = wrong.prove(peer_proof_label, theirs.data(), theirs.size(), me);
  self->request(*agent, patience, auth_atom::value, join(&bad_proof), caf::actor{})
    .receive([&](caf::ok_atom) { FAIL("the node accepted a proof made with the wrong secret"); },
             [&](caf::error& e) { CHECK_MESSAGE(is(e, errc::not_authenticated), describe(e)); });
  self->request(*agent, patience, spawn_atom::value, make_spawn_request(probe_shard(caf::actor{})))
    .receive([&](const caf::actor&) { FAIL("the node spawned for an unauthenticated peer"); },
             [&](caf::error& e) { CHECK_MESSAGE(is(e, errc::not_authenticated), describe(e)); });
  std::vector<data_route> routes{{"some-node", "127.0.0.1", 9, {}}};
  self->request(*agent, patience, node_routes_atom::value, routes)
    .receive([&](caf::ok_atom) { FAIL("the node took data plane routes from an unauthenticated peer"); },
             [&](caf::error& e) { CHECK_MESSAGE(is(e, errc::not_authenticated), describe(e)); });
  CHECK_MESSAGE(n->wait_log("refused join from node " + me + ": wrong proof of the cluster secret", patience), n->log());
  CHECK_MESSAGE(n->wait_log("refused spawn from node " + me +
                              ": not authenticated (no valid proof of the cluster secret)", patience),
                n->log());

  // Nor can it stop the node with an exit message.
  self->send_exit(*agent, caf::exit_reason::user_shutdown);
  CHECK_MESSAGE(n->wait_log("ignored an exit (exit_reason(user_shutdown)) sent by node " + me, patience), n->log());

  auto good = f.connect(*n);
  CHECK(good.data_port != 0);  // announced in the node's join
  self->request(good.agent, patience, node_routes_atom::value, routes)
    .receive([](caf::ok_atom) {}, [&](caf::error& e) { FAIL(describe(e)); });
  std::vector<data_route> no_host{{"some-node", "", 9, {}}};
  self->request(good.agent, patience, node_routes_atom::value, no_host)
    .receive([](caf::ok_atom) { FAIL("the node took a route without a host"); },
             [&](caf::error& e) {
               CHECK_MESSAGE(describe(e).find("nd_routes[0]: needs a node id and a host") != std::string::npos,
                             describe(e));
             });
  auto status = status_of(good, patience);
  REQUIRE(status);
  CHECK(status->spawned == 0);
  CHECK(status->children == 0);
  CHECK(status->refused == 4);
}

TEST_CASE("a garbage frame from a joined peer is logged with the decoder's error, bans that peer, and the node serves others") {
  cluster_fixture bad_peer;
  auto n = bad_peer.start_node();
  auto bad = bad_peer.connect(*n);
  caf::scoped_actor self{*bad_peer.sys};
  self->send(bad.agent, garbage_heartbeat());  // one way: the node answers nothing
  CHECK_MESSAGE(n->wait_log("keel.Heartbeat", patience), n->log());
  CHECK_MESSAGE(n->wait_log("refusing that node from now on", patience), n->log());
  // Refused from then on, even with a good request.
  auto again = spawn_on(bad, make_spawn_request(probe_shard(caf::actor{})), patience);
  REQUIRE_FALSE(again);
  CHECK_MESSAGE(is(again.error(), errc::not_authenticated), describe(again.error()));

  // Another peer (another actor system, so another CAF node) is served.
  caf::actor_system_config cfg;
  configure_cluster_system(cfg);
  caf::actor_system other{cfg};
  auto good = connect_node(other, "127.0.0.1", n->port(), bad_peer.secret, patience);
  REQUIRE_MESSAGE(good, describe(good.error()));
  auto shard = spawn_on(*good, make_spawn_request(probe_shard(caf::actor{})), patience);
  REQUIRE_MESSAGE(shard, describe(shard.error()));
  auto status = status_of(*good, patience);
  REQUIRE(status);
  CHECK(status->banned_peers == 1);
  CHECK(status->spawned == 1);
  caf::anon_send_exit(*shard, caf::exit_reason::user_shutdown);
}

namespace {

// The node's status once `done` holds of it, or the last one seen at the deadline.
node_status status_when(const node_handle& h, const std::function<bool(const node_status&)>& done) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    auto s = status_of(h, patience);
    REQUIRE_MESSAGE(s, describe(s.error()));
    if (done(*s) || std::chrono::steady_clock::now() > deadline)
      return *s;
  }
}

}  // namespace

TEST_CASE("a node's replica keeps a copy another process sends, serves it back by name, size and CRC, and counts its bytes in the node's status") {
  cluster_fixture f;
  auto n = f.start_node();
  auto h = f.connect(*n);
  auto replica = replica_of(h, patience);
  REQUIRE_MESSAGE(replica, describe(replica.error()));
  auto frame = build<schema::ShardSnapshot>(1024, [](schema::ShardSnapshot::Builder b) {
    b.setCheckpoint(3);
    b.setShard(1);
    b.setRunId("run");
  });
  auto sealed = sealed_summary_of(*frame.frame());
  chain_link link{3, "ckpt-3.shard-1.snap", sealed.file_bytes, sealed.payload_crc32c};
  caf::anon_send(*replica, replica_keep_atom::value, std::string("run"), uint32_t{1}, link, std::vector<chain_link>{},
                 frame);
  auto held = status_when(h, [](const node_status& s) { return s.replica_files == 1; });
  CHECK(held.replica_files == 1);
  CHECK(held.replica_bytes == frame.frame()->size_words() * sizeof(capnp::word));

  auto copy = fetch_replica_copy(*f.sys, *replica, nullptr, link, patience);
  REQUIRE_MESSAGE(copy, describe(copy.error()));
  auto back = sealed_summary_of(*copy->frame());
  CHECK(back.file_bytes == link.bytes);
  CHECK(back.payload_crc32c == link.crc32c);
  auto other = link;
  other.crc32c ^= 1;
  auto miss = fetch_replica_copy(*f.sys, *replica, nullptr, other, patience);
  REQUIRE_FALSE(miss);
  CHECK(is(miss.error(), errc::not_found));

  n->signal(SIGTERM);
  CHECK_MESSAGE(n->wait_exit(patience) == 0, n->log());
}

TEST_CASE("a node builds each model once for its spawns: the same spec is the same model, the third spec evicts the least recent, a failed build is not kept") {
  model_cache cache(2);
  model_spec probe;
  probe.name = "probe";
  auto a = cache.get(probe, "/tmp");
  REQUIRE_MESSAGE(a, describe(a.error()));
  auto again = cache.get(probe, "/tmp");
  REQUIRE(again);
  CHECK(again->get() == a->get());
  CHECK(cache.builds() == 1);
  // Another option or another data folder is another model.
  auto wide = probe;
  wide.options.probe.dense_keys = 7;
  auto b = cache.get(wide, "/tmp");
  REQUIRE(b);
  CHECK(b->get() != a->get());
  CHECK((*b)->layout().dense_size() != (*a)->layout().dense_size());
  CHECK(cache.builds() == 2);
  CHECK(cache.get(probe, "/tmp")->get() == a->get());  // probe is the most recent again
  auto narrow = probe;
  narrow.options.probe.dense_keys = 3;
  REQUIRE(cache.get(narrow, "/tmp"));  // evicts `wide`
  CHECK(cache.builds() == 3);
  CHECK(cache.get(probe, "/tmp")->get() == a->get());
  CHECK(cache.builds() == 3);
  REQUIRE(cache.get(wide, "/tmp"));
  CHECK(cache.builds() == 4);
  model_spec unknown;
  unknown.name = "no-such-model";
  CHECK(!cache.get(unknown, "/tmp"));
  CHECK(!cache.get(unknown, "/tmp"));
  CHECK(cache.builds() == 4);
}
