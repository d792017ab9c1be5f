// P1: pushes and pulls between two processes on loopback, a worker's side
// in this process and a real parameter shard (ASP, SGD) in a forked one,
// over keel's data plane and over CAF's middleman, each beside raw TCP
// moving the same bytes in the same run (send everything, then one ack);
// and over a second data plane with TLS (certificates from
// scripts/make-dev-certs.sh, verified both ways), beside the same without.
//   data_plane_bench [pushes_per_size=64] [rounds=3]
// Each figure is the best of `rounds` alternating runs (the VM's noise only
// ever slows a run down). Every push is applied by the shard: the bench
// fails if an ack is not "applied".
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster/node_client.hpp"
#include "actors/data_plane/data_plane.hpp"
#include "actors/data_plane/data_plane_wire.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "bench/messages/push_bench.hpp"

using namespace keel;
using keel::bench::make_push;
using keel::bench::seconds_since;
using namespace std::chrono_literals;

namespace {

constexpr size_t sizes_mib[] = {1, 16};
constexpr size_t window = 4;  // requests in flight, as a worker with 4 shards
// raw TCP, data plane, one shard per size, the acknowledging sink, the TLS data plane
constexpr size_t num_ports = 4 + std::size(sizes_mib);
constexpr size_t tls_port_index = num_ports - 1;
constexpr size_t sink_port_index = num_ports - 2;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "data_plane_bench: %s\n", what.c_str());
  std::exit(1);
}

// A CA and the certificate "bench-node" in a fresh directory, made by the
// project's script (both processes load them).
std::string make_certs() {
  char tmpl[] = "/tmp/keel-bench-certs-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr)
    die("mkdtemp");
  auto command = std::string("bash ") + KEEL_SCRIPTS_DIR + "/make-dev-certs.sh " + tmpl + " bench-node >/dev/null";
  if (std::system(command.c_str()) != 0)
    die("cannot make certificates with " + command);
  return tmpl;
}

// This process's data plane, on a port the OS picks, with the bench's
// secret (both processes share it) and no log lines; with TLS when
// `certs` names a directory of make_certs.
std::shared_ptr<data_plane> start_plane(caf::actor_system& sys, const std::string& certs = {}) {
  auto secret = cluster_secret::from_bytes("data_plane_bench secret, 32 bytes", "bench");
  if (!secret)
    die("secret");
  data_plane_config dc;
  dc.secret = *secret;
  if (!certs.empty()) {
    auto ctx = tls_context::load({certs + "/bench-node.pem", certs + "/bench-node.key", certs + "/ca.pem"});
    if (!ctx)
      die(describe(ctx.error()));
    dc.tls = *ctx;
  }
  dc.log = [](const std::string&) {};
  auto plane = data_plane::start(sys, dc);
  if (!plane)
    die("data plane: " + describe(plane.error()));
  return *plane;
}

// Raw TCP ceiling, server side: per connection, a u64 byte count, that many
// bytes, then one byte back.
void raw_server(dp::socket_fd listener) {
  std::vector<char> buf(1 << 20);
  for (;;) {
    int c = ::accept(listener.get(), nullptr, nullptr);
    if (c < 0)
      return;
    dp::socket_fd conn(c);
    uint64_t total = 0;
    if (!dp::read_exact(c, &total, sizeof total))
      continue;
    while (total > 0) {
      auto n = ::recv(c, buf.data(), std::min<uint64_t>(total, buf.size()), 0);
      if (n <= 0)
        break;
      total -= static_cast<uint64_t>(n);
    }
    char ack = 1;
    dp::write_exact(c, &ack, 1);
  }
}

double raw_tcp_gbps(uint16_t port, size_t bytes, size_t count) {
  auto fd = dp::connect_to("127.0.0.1", port, 5000ms);
  if (!fd)
    die("raw connect: " + describe(fd.error()));
  dp::set_options(fd->get(), 0ms);
  std::vector<char> payload(bytes, 3);
  uint64_t total = bytes * count;
  auto t0 = std::chrono::steady_clock::now();
  if (!dp::write_exact(fd->get(), &total, sizeof total))
    die("raw write");
  for (size_t i = 0; i < count; ++i)
    if (!dp::write_exact(fd->get(), payload.data(), bytes))
      die("raw write");
  char ack;
  if (!dp::read_exact(fd->get(), &ack, 1))
    die("raw ack");
  return static_cast<double>(total) / seconds_since(t0) / 1e9;
}

[[noreturn]] void serve(int port_pipe, int stop_pipe, const std::string& certs) {
  uint16_t raw_port = 0;
  auto listener = dp::listen_on("127.0.0.1", raw_port);
  if (!listener)
    die("raw listen");
  std::thread raw(raw_server, std::move(*listener));
  raw.detach();
  caf::actor_system_config cfg;
  configure_cluster_system(cfg);
  caf::actor_system sys{cfg};
  auto plane = start_plane(sys);
  auto plane_tls = start_plane(sys, certs);
  uint16_t ports[num_ports] = {raw_port, plane->port()};
  ports[tls_port_index] = plane_tls->port();
  std::vector<caf::actor> shards;
  for (size_t i = 0; i < std::size(sizes_mib); ++i) {
    size_t floats = sizes_mib[i] << 18;
    parameter_shard_config o;
    o.core.num_workers = 1;
    o.core.dense = {0, floats};
    o.core.rule = {consistency_kind::asp, 0};
    o.core.optimizer.lr = 1e-6f;
    o.initial_dense.assign(floats, 0.0f);
    auto s = spawn_parameter_shard(sys, std::move(o));
    if (!s)
      die("shard: " + describe(s.error()));
    plane->serve(*s);
    plane_tls->serve(*s);
    auto port = sys.middleman().publish(*s, 0, "127.0.0.1", true);
    if (!port)
      die("publish");
    ports[2 + i] = *port;
    shards.push_back(*s);
  }
  // Transport only: an actor that acknowledges every push without reading it.
  auto ack = build<schema::PushAck>(32, [](schema::PushAck::Builder b) {
    b.setSeq(1);
    b.setStatus(schema::PushAck::Status::APPLIED);
  });
  auto sink = sys.spawn([ack]() -> caf::behavior { return {[ack](const push_msg&) { return ack; }}; });
  plane->serve(sink);
  plane_tls->serve(sink);
  auto sink_port = sys.middleman().publish(sink, 0, "127.0.0.1", true);
  if (!sink_port)
    die("publish");
  ports[sink_port_index] = *sink_port;
  if (::write(port_pipe, ports, sizeof ports) != sizeof ports)
    die("port pipe");
  char c;
  while (::read(stop_pipe, &c, 1) > 0) {
  }
  std::_Exit(0);
}

// A pull of the whole shard at `clock`. Each pull of a run asks at another
// clock (an ASP shard serves any), so the shard builds every reply afresh:
// it answers a repeated pull with its last reply (actors/ps/parameter_shard.cpp).
pull_request_msg make_pull(size_t floats, uint64_t clock) {
  return build<schema::PullRequest>(64, [&](schema::PullRequest::Builder b) {
    b.setWorker(0);
    b.setClock(clock);
    auto r = b.initDense(1)[0];
    r.setBegin(0);
    r.setEnd(floats);
  });
}

struct client {
  caf::actor_system& sys;
  std::shared_ptr<data_plane> plane;
  std::shared_ptr<data_plane> plane_tls;
  std::vector<caf::actor> shards;
  std::vector<uint64_t> seq;
  caf::actor sink;
};

// Times `count` requests kept `window` in flight, after one round trip
// that connects and warms the pools; GB/s of `bytes` per request.
template <class Send, class Await>
double windowed_gbps(size_t bytes, size_t count, Send send_one, Await await_one) {
  send_one();
  await_one();
  size_t sent = 0, done = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (; sent < count && sent < window; ++sent) send_one();
  for (; done < count; ++done) {
    await_one();
    if (sent < count) {
      send_one();
      ++sent;
    }
  }
  return static_cast<double>(bytes * count) / seconds_since(t0) / 1e9;
}

// Pushes; each ack must say "applied". To a shard, each push is built by
// copying a gradient, as a worker does; to the sink (transport only) the
// same few prebuilt pushes are sent again and again.
// `plane`: the data plane to go through (null: CAF's middleman).
double push_gbps(client& cl, size_t i, size_t count, data_plane* plane, bool to_sink = false) {
  bool over_plane = plane != nullptr;
  auto& shard = to_sink ? cl.sink : cl.shards[i];
  size_t floats = sizes_mib[i] << 18;
  std::vector<float> grad(floats, 0.5f);
  std::vector<push_msg> ready;
  if (to_sink)
    for (size_t k = 0; k <= window; ++k) ready.push_back(make_push(grad, k + 1));
  caf::actor via = over_plane ? plane->route(shard) : caf::actor{};
  if (over_plane && !via)
    die("no data plane route to the shard");
  caf::scoped_actor self{cl.sys};
  size_t next = 0;
  auto send_one = [&] {
    auto m = to_sink ? ready[next++ % ready.size()] : make_push(grad, ++cl.seq[i]);
    if (over_plane)
      self->send(via, dp_forward_atom::value, shard, std::move(m));
    else
      self->send(shard, std::move(m));
  };
  auto await_one = [&] {
    self->receive(
      [&](const push_ack_msg& a) {
        auto d = decode(a);
        if (!d || d->root().getStatus() != schema::PushAck::Status::APPLIED)
          die("a push was not applied");
      },
      [&](caf::error& e) { die("push: " + describe(e)); },
      caf::after(60s) >> [] { die("no ack within 60 s"); });
  };
  return windowed_gbps(floats * 4, count, send_one, await_one);
}

// Pulls of the whole shard.
double pull_gbps(client& cl, size_t i, size_t count, data_plane* plane) {
  bool over_plane = plane != nullptr;
  auto& shard = cl.shards[i];
  size_t floats = sizes_mib[i] << 18;
  caf::actor via = over_plane ? plane->route(shard) : caf::actor{};
  if (over_plane && !via)
    die("no data plane route to the shard");
  caf::scoped_actor self{cl.sys};
  uint64_t clock = 0;
  auto send_one = [&] {
    if (over_plane)
      self->send(via, dp_forward_atom::value, shard, make_pull(floats, ++clock));
    else
      self->send(shard, make_pull(floats, ++clock));
  };
  auto await_one = [&] {
    self->receive(
      [&](const pull_reply_msg& r) {
        auto d = decode(r);
        if (!d || d->root().getDense()[0].getValues().size() != floats * 4)
          die("a pull reply is not the whole shard");
      },
      [&](caf::error& e) { die("pull: " + describe(e)); },
      caf::after(60s) >> [] { die("no pull reply within 60 s"); });
  };
  return windowed_gbps(floats * 4, count, send_one, await_one);
}

}  // namespace

int main(int argc, char** argv) {
  size_t count = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  size_t rounds = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 3;
  if (count == 0 || rounds == 0) {
    std::fprintf(stderr, "usage: data_plane_bench [pushes_per_size>0] [rounds>0]\n");
    return 2;
  }
  auto certs = make_certs();
  int port_pipe[2], stop_pipe[2];
  if (::pipe(port_pipe) != 0 || ::pipe(stop_pipe) != 0)
    die("pipe");
  pid_t child = ::fork();  // before this process starts any thread
  if (child < 0)
    die("fork");
  if (child == 0) {
    ::close(port_pipe[0]);
    ::close(stop_pipe[1]);
    serve(port_pipe[1], stop_pipe[0], certs);
  }
  ::close(port_pipe[1]);
  ::close(stop_pipe[0]);
  uint16_t ports[num_ports];
  if (::read(port_pipe[0], ports, sizeof ports) != sizeof ports)
    die("the server did not report its ports");
  {
    caf::actor_system_config cfg;
    configure_cluster_system(cfg);
    caf::actor_system sys{cfg};
    client cl{sys, start_plane(sys), start_plane(sys, certs), {}, {}, {}};
    auto sink = sys.middleman().remote_actor("127.0.0.1", ports[sink_port_index]);
    if (!sink)
      die("remote_actor: " + sys.render(sink.error()));
    cl.sink = *sink;
    for (size_t i = 0; i < std::size(sizes_mib); ++i) {
      auto s = sys.middleman().remote_actor("127.0.0.1", ports[2 + i]);
      if (!s)
        die("remote_actor: " + sys.render(s.error()));
      cl.shards.push_back(*s);
      cl.seq.push_back(0);
    }
    cl.plane->add_route(to_string(cl.shards[0].node()), "127.0.0.1", ports[1]);
    cl.plane_tls->add_route(to_string(cl.shards[0].node()), "127.0.0.1", ports[tls_port_index], "bench-node");
    std::printf("P1: worker -> shard (ASP, SGD applied) in another process on loopback, %zu requests per size,\n"
                "%zu in flight, best of %zu rounds; ceiling: raw TCP sending the same bytes, then a 1-byte ack\n\n",
                count, window, rounds);
    std::printf("%-8s %-40s %10s %12s %7s\n", "payload", "measurement", "GB/s", "ceiling GB/s", "ratio");
    for (size_t i = 0; i < std::size(sizes_mib); ++i) {
      double tcp = 0, dp_push = 0, caf_push = 0, dp_pull = 0, caf_pull = 0, dp_sink = 0, caf_sink = 0;
      double tls_push = 0, tls_pull = 0, tls_sink = 0;
      auto* plain = cl.plane.get();
      auto* tls = cl.plane_tls.get();
      size_t bytes = sizes_mib[i] << 20;
      for (size_t r = 0; r < rounds; ++r) {
        tcp = std::max(tcp, raw_tcp_gbps(ports[0], bytes, count));
        dp_push = std::max(dp_push, push_gbps(cl, i, count, plain));
        tls_push = std::max(tls_push, push_gbps(cl, i, count, tls));
        caf_push = std::max(caf_push, push_gbps(cl, i, count, nullptr));
        dp_pull = std::max(dp_pull, pull_gbps(cl, i, count, plain));
        tls_pull = std::max(tls_pull, pull_gbps(cl, i, count, tls));
        caf_pull = std::max(caf_pull, pull_gbps(cl, i, count, nullptr));
        dp_sink = std::max(dp_sink, push_gbps(cl, i, count, plain, true));
        tls_sink = std::max(tls_sink, push_gbps(cl, i, count, tls, true));
        caf_sink = std::max(caf_sink, push_gbps(cl, i, count, nullptr, true));
      }
      auto size = std::to_string(sizes_mib[i]) + " MiB";
      auto row = [&](const char* what, double v) {
        std::printf("%-8s %-40s %10.2f %12.2f %7.2f\n", size.c_str(), what, v, tcp, v / tcp);
      };
      row("push+ack, data plane", dp_push);
      row("push+ack, CAF middleman", caf_push);
      row("pull+reply, data plane", dp_pull);
      row("pull+reply, CAF middleman", caf_pull);
      row("push+ack, data plane, transport only", dp_sink);
      row("push+ack, CAF middleman, transport only", caf_sink);
      auto tls_row = [&](const char* what, double v, double without) {
        std::printf("%-8s %-40s %10.2f %12.2f %7.2f  (ceiling: the same without TLS)\n", size.c_str(), what, v,
                    without, v / without);
      };
      tls_row("push+ack, data plane, TLS", tls_push, dp_push);
      tls_row("pull+reply, data plane, TLS", tls_pull, dp_pull);
      tls_row("push+ack, data plane, TLS, transport only", tls_sink, dp_sink);
    }
    auto st = cl.plane->stats();
    std::printf("\ndata plane (this side): %llu requests, %.1f MB out, %.1f MB in\n",
                static_cast<unsigned long long>(st.requests_out), st.bytes_out / 1e6, st.bytes_in / 1e6);
    cl.plane->stop();
    cl.plane_tls->stop();
    for (auto& s : cl.shards) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(cl.sink, caf::exit_reason::user_shutdown);
    exempt_caf_network_layer_from_leak_checks(sys);
  }
  ::close(stop_pipe[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::error_code ec;
  std::filesystem::remove_all(certs, ec);
  return 0;
}
