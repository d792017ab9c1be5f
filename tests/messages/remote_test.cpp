// Two actor systems in one process, connected through CAF's middleman on
// 127.0.0.1, exchange every message type: proves each type is registered and
// its bytes survive the real network path (CAF017.md, gotcha 5).
#include <chrono>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <doctest/doctest.h>

#include "messages/register_types.hpp"
#include "samples.hpp"

using namespace keel;
using namespace keel::test;
using namespace std::chrono_literals;

namespace {

caf::actor_system_config& configure(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  cfg.set("middleman.heartbeat-interval", caf::timespan{200ms});
  cfg.set("middleman.connection-timeout", caf::timespan{2000ms});
  return cfg;
}

// Echoes every message type back unchanged, after checking it decodes.
caf::behavior echo_server() {
  auto echo = [](const auto& m) -> caf::result<std::decay_t<decltype(m)>> {
    if (auto d = decode(m); !d)
      return d.error();
    return m;
  };
  return {
    [=](const push_msg& m) { return echo(m); },
    [=](const push_ack_msg& m) { return echo(m); },
    [=](const pull_request_msg& m) { return echo(m); },
    [=](const pull_reply_msg& m) { return echo(m); },
    [=](const snapshot_request_msg& m) { return echo(m); },
    [=](const shard_snapshot_msg& m) { return echo(m); },
    [=](const checkpoint_manifest_msg& m) { return echo(m); },
    [=](const directory_update_msg& m) { return echo(m); },
    [=](const heartbeat_msg& m) { return echo(m); },
    [=](const node_join_msg& m) { return echo(m); },
  };
}

}  // namespace

TEST_CASE("two nodes connected over loopback exchange every message type intact, including a 16 MiB push") {
  caf::actor_system_config server_cfg;
  caf::actor_system server_sys{configure(server_cfg)};
  auto server = server_sys.spawn(echo_server);
  auto port = server_sys.middleman().publish(server, 0, "127.0.0.1", true);
  REQUIRE_MESSAGE(port, server_sys.render(port.error()));

  caf::actor_system_config client_cfg;
  caf::actor_system client_sys{configure(client_cfg)};
  auto remote = client_sys.middleman().remote_actor("127.0.0.1", *port);
  REQUIRE_MESSAGE(remote, client_sys.render(remote.error()));
  caf::scoped_actor self{client_sys};

  int answered = 0;
  auto exchange = [&](const auto& m, auto&& check) {
    using M = std::decay_t<decltype(m)>;
    self->request(*remote, 30s, m)
      .receive(
        [&](const M& back) {
          CHECK(back.frame() != m.frame());  // crossed the network as bytes
          auto d = decode(back);
          REQUIRE_MESSAGE(d, describe(d.error()));
          check(d->root());
          ++answered;
        },
        [&](caf::error& e) { FAIL(client_sys.render(e)); });
  };
  constexpr size_t sixteen_mib_of_floats = (size_t{16} << 20) / 4;
  exchange(sample_push(sixteen_mib_of_floats, 11), [&](auto r) { check_push(r, sixteen_mib_of_floats, 11); });
  exchange(sample_push_ack(), [](auto r) { CHECK(r.getShardVersion() == 99); });
  exchange(sample_pull_request(), [](auto r) { CHECK(r.getClock() == 12); });
  exchange(sample_pull_reply(), [](auto r) { CHECK(r.getDense().size() == 1); });
  exchange(sample_snapshot_request(), [](auto r) { CHECK(r.getShard() == 1); });
  exchange(sample_shard_snapshot(), [](auto r) { CHECK(r.getTensors().size() == 1); });
  exchange(sample_manifest(), [](auto r) { CHECK(r.getShards().size() == 2); });
  exchange(sample_directory_update(), [](auto r) { CHECK(r.getIncarnation() == 3); });
  exchange(sample_heartbeat(), [](auto r) { CHECK(r.getNode() == "node-a"); });
  exchange(sample_node_join(), [](auto r) { CHECK(r.getPort() == 4242); });
  CHECK(answered == 10);

  self->send_exit(*remote, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(server, caf::exit_reason::user_shutdown);
}
