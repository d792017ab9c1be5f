// TLS on every link (issue 19): `keel node` with --tls-cert/--tls-key/--tls-ca
// refuses, during the TLS handshake and with a logged reason, a peer whose
// certificate another CA signed and (on the connecting side) a node whose
// certificate names another node than the route; the wire carries no
// readable push or frame; and a BSP run over TLS ends bit-identical to the
// same run without. Certificates come from scripts/make-dev-certs.sh, as a
// user's would. Loopback only.
#include <caf/io/all.hpp>

#include "actors/cluster/cluster_gate.hpp"
#include "actors/data_plane/data_plane.hpp"
#include "actors/data_plane/data_plane_wire.hpp"
#include "cluster_fixture.hpp"
#include "keel_output.hpp"
#include "recording_proxy.hpp"

using namespace keel;
using namespace keel::test;
using namespace std::chrono_literals;

namespace {

constexpr auto patience = 10s;

// Two CAs made by the project's script: the cluster's ("ca", with nodes
// node-a, node-b and a coordinator) and a stranger's ("other", whose node-a
// states the right name under the wrong CA).
struct tls_certs {
  std::filesystem::path dir = make_temp_dir();
  tls_certs() {
    for (auto [sub, names] : {std::pair{"ca", "node-a node-b coordinator"}, {"other", "node-a"}}) {
      auto r = run_command(std::string("bash ") + KEEL_SCRIPTS_DIR + "/make-dev-certs.sh " + (dir / sub).string() +
                           " " + names);
      REQUIRE_MESSAGE(r.status == 0, r.output);
    }
    std::filesystem::create_directory(dir / "both");
    std::ofstream both(dir / "both" / "ca.pem");
    both << std::ifstream(dir / "ca" / "ca.pem").rdbuf() << std::ifstream(dir / "other" / "ca.pem").rdbuf();
  }
  ~tls_certs() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  tls_files files(const std::string& ca, const std::string& name, const std::string& trust = {}) const {
    auto d = dir / ca;
    return {(d / (name + ".pem")).string(), (d / (name + ".key")).string(),
            (dir / (trust.empty() ? ca : trust) / "ca.pem").string()};
  }
  std::vector<std::string> flags(const std::string& name) const {
    auto f = files("ca", name);
    return {"--tls-cert", f.cert, "--tls-key", f.key, "--tls-ca", f.ca};
  }
  std::shared_ptr<const tls_context> context(const std::string& ca, const std::string& name,
                                             const std::string& trust = {}) const {
    auto c = tls_context::load(files(ca, name, trust));
    REQUIRE_MESSAGE(c, describe(c.error()));
    return *c;
  }
};

uint16_t data_port_of(node_process& n) {
  auto line = n.wait_stdout("keel node: data plane on ", patience);
  REQUIRE(line);
  return static_cast<uint16_t>(std::stoul(line->substr(line->rfind(':') + 1)));
}

// A raw TLS client at 127.0.0.1:port: handshake, then one read, which
// fails when the listener refused our certificate (TLS 1.3 tells the
// client only after its own handshake is done).
std::string tls_attempt(const tls_context& ctx, uint16_t port, const std::string& name) {
  auto s = dp::connect_to("127.0.0.1", port, 2000ms);
  REQUIRE(s);
  auto session = tls_session::make(ctx, s->get(), tls_session::role::connect, name);
  REQUIRE(session);
  if (auto err = (*session)->handshake(2000ms))
    return describe(err);
  char byte;
  if (!(*session)->read_exact(&byte, 1, 2000ms))
    return (*session)->failure();
  return "accepted";
}

bool contains(const std::vector<std::string>& streams, const std::string& pattern) {
  for (auto& s : streams)
    if (s.find(pattern) != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("a peer whose certificate another CA signed is refused in the TLS handshake, with a logged reason, on the node's gate and data plane") {
  tls_certs certs;
  cluster_fixture f;
  auto flags = certs.flags("node-a");
  flags.push_back("--data-port");
  flags.push_back("0");
  auto n = f.start_node(flags);
  auto data_port = data_port_of(*n);
  // The stranger trusts our CA too (so it gets past its own check of the
  // node) but holds a certificate of its own CA, with the right name.
  auto stranger = certs.context("other", "node-a", "both");
  auto gated = connect_through_gate(*f.sys, "127.0.0.1", n->port(), f.secret, patience, tls_peer{stranger, "node-a"});
  REQUIRE_FALSE(gated);
  CHECK(is(gated.error(), errc::not_authenticated));
  CHECK(describe(gated.error()).find("alert") != std::string::npos);
  CHECK(n->wait_log("to port " + std::to_string(n->port()) +
                      ": TLS: its certificate (CN node-a) is not signed by this cluster's CA",
                    patience));
  CHECK(n->wait_log("refused a connection from 127.0.0.1:", 0ms));
  CHECK(tls_attempt(*stranger, data_port, "node-a").find("alert") != std::string::npos);
  CHECK(n->wait_log("data plane: refused a connection from 127.0.0.1:", patience));
  CHECK(n->wait_log("to port " + std::to_string(data_port) +
                      ": TLS: its certificate (CN node-a) is not signed by this cluster's CA",
                    patience));
  // A member with the cluster's CA gets through, and the node serves it.
  auto member = certs.context("ca", "coordinator");
  auto h = connect_node(*f.sys, "127.0.0.1", n->port(), f.secret, patience, {}, tls_peer{member, "node-a"});
  REQUIRE_MESSAGE(h, describe(h.error()));
  CHECK(h->tls_name == "node-a");
  auto shard = spawn_small_shard(*h, patience);
  CHECK(to_string(shard.node()) == n->node_id());
  CHECK(tls_attempt(*member, data_port, "node-a") != "accepted");  // TLS passes; the secret's hello is awaited
  CHECK(n->wait_log("authenticated from 127.0.0.1:", 0ms));
  CHECK(n->wait_log("(TLS, certificate of coordinator)", 0ms));
}

TEST_CASE("a node whose certificate states another name than its route's is refused by the side that connects, on CAF's link and the data plane") {
  tls_certs certs;
  cluster_fixture f;
  auto n = f.start_node(certs.flags("node-a"));
  auto data_port = data_port_of(*n);
  auto member = certs.context("ca", "coordinator");
  auto wrong = connect_node(*f.sys, "127.0.0.1", n->port(), f.secret, patience, {}, tls_peer{member, "node-b"});
  REQUIRE_FALSE(wrong);
  CHECK(is(wrong.error(), errc::not_authenticated));
  CHECK_MESSAGE(describe(wrong.error()).find("its certificate is for node-a, not for the node its route names") !=
                  std::string::npos,
                describe(wrong.error()));
  // The data plane: a route naming node-b to the node that is node-a.
  auto h = connect_node(*f.sys, "127.0.0.1", n->port(), f.secret, patience, {}, tls_peer{member, "node-a"});
  REQUIRE_MESSAGE(h, describe(h.error()));
  auto shard = spawn_small_shard(*h, patience);
  std::mutex mtx;
  std::vector<std::string> lines;
  data_plane_config dc;
  dc.secret = f.secret;
  dc.tls = member;
  dc.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> guard(mtx);
    lines.push_back(line);
  };
  auto plane = data_plane::start(*f.sys, dc);
  REQUIRE(plane);
  (*plane)->add_route(n->node_id(), "127.0.0.1", data_port, "node-b");
  auto fwd = (*plane)->route(shard);
  REQUIRE(fwd);
  auto refused = [&] {
    std::lock_guard<std::mutex> guard(mtx);
    for (auto& l : lines)
      if (l.find("refused: TLS:") != std::string::npos &&
          l.find("its certificate is for node-a, not for the node its route names") != std::string::npos)
        return true;
    return false;
  };
  CHECK(wait_until(refused, patience));
  CHECK((*plane)->stats().connections_out == 0);
  (*plane)->stop();
}

TEST_CASE("with TLS on, a recording of one node's connections holds no pushed float values and no frames, and without TLS it holds both") {
  // The node under watch listens on 127.0.0.2; a recording proxy on
  // 127.0.0.1 carries its gate port and its data port (the coordinator
  // connects to the proxy, and tells the other node the proxy's address
  // with the node's data port), so the coordinator's CAF link to it and the
  // other node's data-plane pushes to it all cross the proxy.
  tls_certs certs;
  cluster_fixture f;
  const std::string minus_one(reinterpret_cast<const char*>("\x00\x00\x80\xbf"), 4);  // -1.0f, little-endian
  std::string pushed;
  for (int i = 0; i < 16; ++i) pushed += minus_one;  // the probe's gradient, 16 keys in a row
  const std::string data_frame("KDP1\x01\x00\x00\x00", 8);  // a data-plane header of a push
  for (bool tls : {false, true}) {
    CAPTURE(tls);
    // The proxy's port is the node's data port too, on 127.0.0.2: held by
    // the proxy from the start, so no other process can take it between
    // choosing it and listening on it.
    recording_proxy rec;
    auto data_port = rec.relay(0, "127.0.0.2", 0);
    std::vector<std::string> a_flags{"--data-port", std::to_string(data_port)};
    std::vector<std::string> b_flags;
    if (tls) {
      for (auto& x : certs.flags("node-a")) a_flags.push_back(x);
      b_flags = certs.flags("node-b");
    }
    auto a = node_process::start([&] {
      std::vector<std::string> args{"--listen", "127.0.0.2:0", "--secret-file", f.secret_file};
      args.insert(args.end(), a_flags.begin(), a_flags.end());
      return args;
    }());
    auto b = f.start_node(b_flags);
    auto gate = rec.relay(0, "127.0.0.2", a->port());
    std::string connect = "--connect " + std::string(tls ? "node-a@" : "") + "127.0.0.1:" + std::to_string(gate) +
                          "," + (tls ? "node-b@" : "") + "127.0.0.1:" + std::to_string(b->port()) +
                          " --secret-file " + f.secret_file;
    if (tls) {
      auto c = certs.files("ca", "coordinator");
      connect += " --tls-cert " + c.cert + " --tls-key " + c.key + " --tls-ca " + c.ca;
    }
    auto run = run_keel_at(KEEL_BINARY, "cluster " + connect + " --model probe --steps 20 --workers 2 --shards 2");
    REQUIRE_MESSAGE(run.status == 0, run.out);
    rec.stop();
    auto streams = rec.recordings();
    REQUIRE(rec.bytes() > 10000);
    // Both the CAF link and the data plane crossed the proxy.
    CHECK(a->log().find("data plane: connection from") != std::string::npos);
    CHECK(contains(streams, pushed) == !tls);
    CHECK(contains(streams, data_frame) == !tls);
    CHECK(contains(streams, "KEELCP01") == !tls);  // the gate's hello
    CHECK(contains(streams, "KEELDP01") == !tls);  // the data plane's hello
    CHECK(contains(streams, "keel.") == !tls);     // type names in CAF's messages
  }
}

TEST_CASE("a keel cluster with TLS on every link trains to the same params_sha256 as without (BSP)") {
  tls_certs certs;
  auto c = certs.files("ca", "node-a");
  std::string train = "cluster --nodes 2 --model probe --steps 30 --workers 2 --shards 2";
  auto plain = run_keel_at(KEEL_BINARY, train);
  REQUIRE_MESSAGE(plain.status == 0, plain.out);
  auto tls = run_keel_at(KEEL_BINARY, train + " --tls-cert " + c.cert + " --tls-key " + c.key + " --tls-ca " + c.ca);
  REQUIRE_MESSAGE(tls.status == 0, tls.out);
  CHECK(tls.out.find("(TLS, certificate of node-a)") != std::string::npos);
  CHECK(sha_in(tls.out) == sha_in(plain.out));
}

TEST_CASE("keel node and keel cluster refuse unusable TLS files with exit 2 and a message naming the file") {
  tls_certs certs;
  cluster_fixture f;
  auto good = certs.files("ca", "node-a");
  auto other = certs.files("other", "node-a");
  auto missing = (certs.dir / "missing.pem").string();
  struct bad_case {
    std::string flags, says;
  };
  std::vector<bad_case> cases{
    {"--tls-cert " + missing + " --tls-key " + good.key + " --tls-ca " + good.ca, "--tls-cert " + missing + ": does not exist"},
    {"--tls-cert " + good.cert + " --tls-key " + other.key + " --tls-ca " + good.ca,
     "--tls-key " + other.key + ": is not the key of the certificate " + good.cert},
    {"--tls-cert " + good.cert + " --tls-key " + good.key + " --tls-ca " + other.ca,
     "--tls-cert " + good.cert + ": is not valid under the CA " + other.ca},
    {"--tls-cert " + good.cert + " --tls-key " + good.key, "--tls-ca is missing"},
    {"--tls-cert " + good.key + " --tls-key " + good.key + " --tls-ca " + good.ca, "not a PEM certificate"},
    // Read bounded, never a device's endless bytes.
    {"--tls-cert " + good.cert + " --tls-key " + good.key + " --tls-ca /dev/zero",
     "--tls-ca /dev/zero: not a regular file (it is a character device)"},
  };
  for (auto& bc : cases) {
    CAPTURE(bc.flags);
    auto node = run_keel_at(KEEL_BINARY, "node --secret-file " + f.secret_file + " " + bc.flags);
    CHECK(node.status == 2);
    CHECK_MESSAGE(node.out.find(bc.says) != std::string::npos, node.out);
    auto cluster = run_keel_at(KEEL_BINARY, "cluster --nodes 1 --model probe --steps 1 " + bc.flags);
    CHECK(cluster.status == 2);
    CHECK_MESSAGE(cluster.out.find(bc.says) != std::string::npos, cluster.out);
  }
}
