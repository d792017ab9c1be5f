// `keel node`: runs this process as a cluster node. It serves a node agent
// (actors/cluster/node_agent.hpp) behind a gate on --listen (actors/cluster/cluster_gate.hpp:
// CAF sees only peers that proved the cluster secret), prints
//   keel node: listening on HOST:PORT (node NODE_ID)
// and, unless --no-data-plane,
//   keel node: data plane on HOST:PORT
// on standard output, optionally joins another node (printing
//   keel node: joined node NODE_ID at HOST:PORT), and serves until SIGTERM
// or SIGINT (or standard input's end with --exit-on-stdin-eof), then stops
// its actors and exits 0. Events (joins, refusals, spawns) go to standard
// error. With --tls-cert, --tls-key and --tls-ca every link (the gate's
// connections, which CAF's BASP then uses, and the data plane's) runs TLS
// with certificates verified both ways, and the secret's challenge inside
// it. Exit 2: bad flags, no usable secret or unusable TLS files; 1: cannot
// listen or join, or the agent was killed from outside. SIGUSR1 arms the
// node to kill itself with SIGKILL in the middle of its next checkpoint
// file write (fault kind crash: a node lost mid-write, deterministically).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <boost/program_options.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/cluster_gate.hpp"
#include "actors/cluster/node_agent.hpp"
#include "actors/cluster/node_client.hpp"
#include "actors/core/replica_store.hpp"
#include "actors/data_plane/data_plane.hpp"
#include "cli_flags.hpp"
#include "commands.hpp"
#include "messages/errors.hpp"
#include "models/model_registry.hpp"
#include "storage/faulty_io.hpp"

namespace keel::cli {

namespace {

struct address {
  std::string host;
  uint16_t port = 0;
  std::string name;  // --join NAME@HOST:PORT: the name its TLS certificate must state
};

caf::expected<address> parse_address(const std::string& flag, const std::string& full) {
  auto at = full.find('@');
  std::string name = at == std::string::npos ? std::string() : full.substr(0, at);
  auto text = at == std::string::npos ? full : full.substr(at + 1);
  auto colon = text.rfind(':');
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, flag + " '" + text + "': " + why + " (expected HOST:PORT)");
  };
  if (colon == std::string::npos || colon == 0)
    return bad("no host");
  auto port_text = text.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos)
    return bad("port is not a number");
  auto port = std::stoul(port_text);
  if (port > 65535)
    return bad("port is above 65535");
  return address{text.substr(0, colon), static_cast<uint16_t>(port), name};
}

// Blocks until SIGTERM or SIGINT (both blocked in every thread, see
// run_node), or until standard input ends when `stdin_eof` is set.
void wait_for_stop(const sigset_t& stop, bool stdin_eof) {
  if (stdin_eof) {
    std::thread([] {
      char buf[256];
      while (::read(STDIN_FILENO, buf, sizeof buf) > 0) {
      }
      ::kill(::getpid(), SIGTERM);  // process-directed, so sigwait sees it
    }).detach();
  }
  int sig = 0;
  sigwait(&stop, &sig);
}

struct node_flags {
  address listen{"127.0.0.1", 0, {}};
  std::optional<address> join;
  cluster_secret secret;
  cluster_settings settings;
  std::string data_dir;
  bool stdin_eof = false;
  uint16_t data_port = 0;
  bool no_data_plane = false;
  size_t max_unauthenticated = 64;
  std::chrono::milliseconds handshake_timeout{1000};
  std::shared_ptr<const tls_context> tls;
};

// The node's data plane, listening beside the gate (null with --no-data-plane).
caf::expected<std::shared_ptr<data_plane>> start_data_plane(caf::actor_system& sys, const node_flags& f) {
  if (f.no_data_plane)
    return std::shared_ptr<data_plane>();
  data_plane_config dc;
  dc.host = f.listen.host;
  dc.port = f.data_port;
  dc.secret = f.secret;
  dc.tls = f.tls;
  dc.log = [](const std::string& line) { std::cerr << "keel node: data plane: " + line + "\n"; };
  return data_plane::start(sys, dc);
}

// Any connected process can kill the agent with exit_reason::kill (CAF 0.17
// delivers it and no actor can trap it). A node without its agent is useless
// and its children unmanaged, so the process ends at once, exit 1, like a
// crash: peers see its actors down, its own supervisor restarts it.
caf::actor watch_agent(caf::actor_system& sys, const caf::actor& agent) {
  return sys.spawn([agent](caf::event_based_actor* w) -> caf::behavior {
    w->monitor(agent);
    w->set_down_handler([](caf::down_msg& dm) {
      std::cerr << "keel node: the node agent stopped (" << to_string(dm.reason) << "); exiting" << std::endl;
      std::_Exit(1);
    });
    return {[](caf::ok_atom) {}};
  });
}

// CAF itself listens nowhere: the gate accepts, and hands CAF only the
// connections that proved the cluster secret (actors/cluster/cluster_gate.hpp).
caf::expected<std::unique_ptr<cluster_gate>> open_gate(caf::actor_system& sys, const node_flags& f,
                                                       const caf::actor& agent) {
  cluster_gate_config gc;
  gc.host = f.listen.host;
  gc.port = f.listen.port;
  gc.secret = f.secret;
  gc.tls = f.tls;
  gc.max_pending = f.max_unauthenticated;
  gc.handshake_timeout = f.handshake_timeout;
  gc.log = [](const std::string& line) { std::cerr << "keel node: " + line + "\n" << std::flush; };
  return cluster_gate::open(sys, gc, agent);
}

// --join: introduces this node (its agent, listening on `port`) to a node
// of the cluster, which tells the agent of its peers.
caf::error join_cluster(caf::actor_system& sys, const node_flags& f, const caf::actor& agent, uint16_t port,
                        caf::scoped_actor& self) {
  join_identity me{agent, f.listen.host, port};
  auto peer = connect_node(sys, f.join->host, f.join->port, f.secret, std::chrono::seconds(5), me,
                           tls_peer{f.tls, f.join->name.empty() ? f.join->host : f.join->name});
  if (!peer)
    return peer.error();
  self->send(agent, node_joined_atom::value, node_info{peer->node, peer->host, peer->port, peer->agent, 0});
  std::cout << "keel node: joined node " << peer->node << " at " << peer->host << ":" << peer->port << std::endl;
  return {};
}

// What the gate, the data plane and the replica saw, on stderr when the node stops.
void report_traffic(const cluster_gate& gate, const data_plane* plane, const replica_store& replicas) {
  auto gs = gate.stats();
  std::cerr << "keel node: the gate accepted " << gs.accepted << " connections: " << gs.authenticated
            << " authenticated, " << gs.refused << " refused (" << gs.evicted << " closed for newer ones, "
            << gs.timed_out << " timed out)\n";
  if (plane) {
    auto s = plane->stats();
    std::cerr << "keel node: data plane carried " << s.requests_out << " requests out and " << s.requests_in
              << " in (" << (s.bytes_out + s.bytes_in) / 1000000 << " MB) over " << s.connections_out << " + "
              << s.connections_in << " connections\n";
  }
  std::cerr << "keel node: peer copies held " << replicas.files() << " files (" << replicas.bytes() / 1000000
            << " MB) at the end, at most " << replicas.peak_bytes() / 1000000 << " MB\n";
}

// The file system the node's shards write through: the real one, which
// SIGUSR1 arms to end this process in the middle of its next write (fault
// kind `crash`, which keel cluster carries out with that signal). A thread
// of its own takes the signal (blocked in every other), so arming is no
// signal handler's work.
std::shared_ptr<faulty_io> crash_on_sigusr1() {
  auto io = faulty_io::wrap(posix_io());
  io_crash die{1, [](const std::filesystem::path& file, uint64_t stored, uint64_t size) {
                 std::fprintf(stderr,
                              "keel node: killed with SIGKILL in the middle of writing %s (%llu of a write's %llu "
                              "bytes stored)\n",
                              file.filename().c_str(), static_cast<unsigned long long>(stored),
                              static_cast<unsigned long long>(size));
                 std::fflush(stderr);
                 ::kill(::getpid(), SIGKILL);
               }};
  std::thread([io, die] {
    sigset_t armed;
    sigemptyset(&armed);
    sigaddset(&armed, SIGUSR1);
    for (;;) {
      int sig = 0;
      if (sigwait(&armed, &sig) != 0)
        return;
      io->arm(die);
      std::fputs("keel node: armed to die in the middle of its next checkpoint file write (SIGUSR1)\n", stderr);
    }
  }).detach();
  return io;
}

int run_node(const node_flags& f) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigset_t blocked = stop;
  sigaddset(&blocked, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);  // before CAF starts its threads
  auto io = crash_on_sigusr1();
  caf::actor_system_config cfg;
  configure_cluster_system(cfg, f.settings);
  caf::actor_system sys{cfg};
  exempt_caf_network_layer_from_leak_checks(sys);
  node_agent_config ac;
  ac.host = f.listen.host;
  ac.secret = f.secret;
  ac.heartbeat_interval = f.settings.heartbeat_interval;
  ac.peer_timeout = f.settings.connection_timeout;
  ac.data_dir = f.data_dir.empty() ? default_data_dir() : std::filesystem::path(f.data_dir);
  auto started = start_data_plane(sys, f);
  if (!started) {
    std::cerr << "keel node: " << describe(started.error()) << "\n";
    return 1;
  }
  std::shared_ptr<data_plane> plane = *started;
  ac.plane = plane;
  ac.replicas = std::make_shared<replica_store>();
  ac.io = io;
  auto agent = spawn_node_agent(sys, ac);
  if (!agent) {
    std::cerr << "keel node: " << describe(agent.error()) << "\n";
    return 2;
  }
  auto watcher = watch_agent(sys, *agent);
  // The agent takes exits (and the messages below) only from its own node,
  // and only with a sender: an anonymous exit could come from anywhere.
  caf::scoped_actor self{sys};
  auto stop_agent = [&] {
    caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
    self->send_exit(*agent, caf::exit_reason::user_shutdown);
  };
  auto gate = open_gate(sys, f, *agent);
  if (!gate) {
    std::cerr << "keel node: cannot listen on " << f.listen.host << ":" << f.listen.port << ": "
              << describe(gate.error()) << "\n";
    stop_agent();
    return 1;
  }
  auto port = (*gate)->port();
  self->send(*agent, node_listening_atom::value, port);
  std::cout << "keel node: listening on " << f.listen.host << ":" << port << " (node " << to_string(sys.node())
            << ")" << (f.tls ? ", TLS as " + f.tls->name() : std::string()) << std::endl;
  if (plane)
    std::cout << "keel node: data plane on " << f.listen.host << ":" << plane->port() << std::endl;
  if (f.join)
    if (auto err = join_cluster(sys, f, *agent, port, self)) {
      std::cerr << "keel node: cannot join " << f.join->host << ":" << f.join->port << ": " << describe(err)
                << "\n";
      stop_agent();
      return 1;
    }
  wait_for_stop(stop, f.stdin_eof);
  std::cerr << "keel node: stopping\n";
  (*gate)->stop();
  // The agent stops its children and waits for them while the middleman is
  // still up (see spawn_node_agent); only then may the system go down.
  self->monitor(*agent);
  stop_agent();
  self->receive([](caf::down_msg&) {},
                caf::after(std::chrono::seconds(10)) >> [] { std::cerr << "keel node: the agent did not stop\n"; });
  if (plane)
    plane->stop();
  report_traffic(**gate, plane.get(), *ac.replicas);
  return 0;
}

// keel node's flags as given, before they are checked and become node_flags.
struct node_args {
  std::string listen = "127.0.0.1:0", join, secret_file;
  tls_files tls;
  uint32_t heartbeat_ms = 200, timeout_ms = 800, handshake_ms = 1000;
};

void declare_flags(command_flags& flags, node_args& g, node_flags& f) {
  constexpr uint32_t hour_ms = 3600 * 1000;
  flags.visible.add_options()("help", "show this help")
    ("listen", text_flag(&g.listen, "HOST:PORT"), "the node's gate, where peers prove the secret and reach the node agent (port 0: any)")
    ("join", text_flag(&g.join, "[NAME@]HOST:PORT", false), "a node to join (NAME: the name its TLS certificate states; default HOST)")
    ("secret-file", text_flag(&g.secret_file, "FILE", false), "file holding the cluster secret (else $KEEL_CLUSTER_SECRET)")
    ("heartbeat-ms", number_flag<uint32_t>(&g.heartbeat_ms, "MS", 1, hour_ms), "heartbeat interval")
    ("connection-timeout-ms", number_flag<uint32_t>(&g.timeout_ms, "MS", 2, hour_ms), "a peer silent this long is down")
    ("data-dir", text_flag(&f.data_dir, "DIR", false), "dataset cache for MNIST models built here")
    ("data-port", number_flag<uint16_t>(&f.data_port, "PORT", 0, 65535),
     "port of the data plane that carries pushes and pulls between nodes (0: any)")
    ("no-data-plane", po::bool_switch(&f.no_data_plane),
     "carry pushes and pulls over CAF's middleman like all other messages")
    ("max-unauthenticated", number_flag<size_t>(&f.max_unauthenticated, "N", 1, 1u << 20),
     "connections awaiting the secret's challenge at once; a newer one closes the oldest")
    ("handshake-timeout-ms", number_flag<uint32_t>(&g.handshake_ms, "MS", 1, hour_ms),
     "a connection that has not proved the cluster secret this long is closed")
    ("tls-cert", text_flag(&g.tls.cert, "FILE", false), "PEM certificate of this node (its name in CN/subjectAltName): TLS on every link")
    ("tls-key", text_flag(&g.tls.key, "FILE", false), "PEM private key of --tls-cert")
    ("tls-ca", text_flag(&g.tls.ca, "FILE", false), "PEM certificate of the CA that signed every member's certificate")
    ("exit-on-stdin-eof", po::bool_switch(&f.stdin_eof), "also stop when standard input ends");
}

// The checks no single flag can make alone, and the secret's and TLS files'
// loading; a status (2, one line naming the flag) when the node cannot start.
std::optional<int> check_flags(const node_args& g, node_flags& f) {
  auto listen = parse_address("--listen", g.listen);
  if (!listen)
    return usage_error("node", "--listen", error_text(listen.error()));
  if (!listen->name.empty())
    return usage_error("node", "--listen", "takes HOST:PORT (a node's TLS name is in its certificate)");
  f.listen = *listen;
  if (!g.join.empty()) {
    auto join = parse_address("--join", g.join);
    if (!join || join->port == 0)
      return usage_error("node", "--join", join ? "needs a port other than 0" : error_text(join.error()));
    f.join = *join;
  }
  if (g.timeout_ms <= g.heartbeat_ms)
    return usage_error("node", "--heartbeat-ms", "must be below --connection-timeout-ms");
  f.handshake_timeout = std::chrono::milliseconds(g.handshake_ms);
  f.settings.heartbeat_interval = std::chrono::milliseconds(g.heartbeat_ms);
  f.settings.connection_timeout = std::chrono::milliseconds(g.timeout_ms);
  auto secret = cluster_secret::from_file_or_env(g.secret_file);
  if (!secret)
    return usage_error("node", "", error_text(secret.error()));
  f.secret = *secret;
  if (g.tls.any()) {
    auto ctx = tls_context::load(g.tls);
    if (!ctx)
      return usage_error("node", "", error_text(ctx.error()));  // names the file
    f.tls = *ctx;
  }
  return std::nullopt;
}

}  // namespace

int node(const args& a) {
  node_args g;
  node_flags f;
  command_flags flags{"node", po::options_description(), {}, {}};
  declare_flags(flags, g, f);
  po::variables_map vm;
  if (auto status = parse_flags(flags, a, vm))
    return *status;
  if (vm.count("help")) {
    print_help(std::cout, "keel node [FLAGS]",
               "Runs this process as a cluster node: its gate admits peers that prove the cluster\n"
               "secret (and, with --tls-*, their certificates), and its agent starts the shards and\n"
               "workers a coordinator places here. Exit status: 0 stopped, 1 failed, 2 bad usage.",
               flags.visible);
    return 0;
  }
  if (auto status = check_flags(g, f))
    return *status;
  return run_node(f);
}

}  // namespace keel::cli
