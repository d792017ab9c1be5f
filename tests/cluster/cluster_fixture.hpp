#pragma once
// The test process as a coordinator: an actor system configured like a node
// (heartbeat 200 ms, connection timeout 800 ms), a cluster secret in a file,
// and `keel node` processes started on 127.0.0.1 with OS-picked ports.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/node_client.hpp"
#include "messages/errors.hpp"
#include "node_process.hpp"

namespace keel::test {

inline std::filesystem::path make_temp_dir() {
  char tmpl[] = "/tmp/keel-cluster-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

inline std::string write_secret(const std::filesystem::path& dir, const std::string& name, const std::string& bytes) {
  auto file = dir / name;
  std::ofstream(file) << bytes << "\n";
  return file.string();
}

struct cluster_fixture {
  std::filesystem::path dir = make_temp_dir();
  std::string secret_text = "keel-test-cluster-secret-0123456789";
  std::string secret_file = write_secret(dir, "secret", secret_text);
  cluster_secret secret = *cluster_secret::from_bytes(secret_text, "test secret");
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;

  cluster_fixture() {
    configure_cluster_system(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    exempt_caf_network_layer_from_leak_checks(*sys);  // tests use remote_actor directly too
  }
  ~cluster_fixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  // A node on 127.0.0.1, port picked by the OS unless given.
  std::unique_ptr<node_process> start_node(std::vector<std::string> extra = {}, uint16_t port = 0) {
    std::vector<std::string> args{"--listen", "127.0.0.1:" + std::to_string(port), "--secret-file", secret_file};
    args.insert(args.end(), extra.begin(), extra.end());
    return node_process::start(args);
  }

  node_handle connect(const node_process& n) {
    auto h = connect_node(*sys, "127.0.0.1", n.port(), secret, std::chrono::seconds(5));
    REQUIRE_MESSAGE(h, describe(h.error()));
    return *h;
  }
};

}  // namespace keel::test
