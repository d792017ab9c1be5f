#pragma once
// The test process as a coordinator: an actor system configured like a node
// (heartbeat 200 ms, connection timeout 800 ms), a cluster secret in a file,
// and `keel node` processes started on 127.0.0.1 with OS-picked ports.

#include <fcntl.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include "actors/cluster/node_client.hpp"
#include "actors/cluster/node_protocol.hpp"
#include "killed_run.hpp"
#include "messages/errors.hpp"
#include "node_process.hpp"

namespace keel::test {

inline std::filesystem::path make_temp_dir() {
  char tmpl[] = "/tmp/keel-cluster-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

// Created 0600, as keel cluster creates its own: a secret is never readable by others.
inline std::string write_secret(const std::filesystem::path& dir, const std::string& name, const std::string& bytes) {
  auto file = dir / name;
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  auto text = bytes + "\n";
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fd);
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

  // "--connect 127.0.0.1:P0,127.0.0.1:P1,... --secret-file F" for `nodes`.
  std::string connect_flags(const std::vector<const node_process*>& nodes) const {
    std::string list;
    for (auto* n : nodes)
      list += (list.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(n->port());
    return "--connect " + list + " --secret-file " + secret_file;
  }

  // Runs `keel cluster CONNECT TRAIN --quiet --checkpoint-dir DIR` (the
  // keel program at `binary`), kills it with SIGKILL once DIR holds
  // `checkpoints` committed checkpoints, and waits until each of `nodes`
  // has stopped the dead job's actors: a coordinator lost mid-run, for a
  // --resume to continue.
  void kill9_coordinator_after_checkpoints(const std::string& binary, const std::string& connect,
                                           const std::string& train, const std::string& dir,
                                           size_t checkpoints,
                                           const std::vector<const node_process*>& nodes) const {
    std::vector<std::string> argv = {binary, "cluster"};
    std::istringstream words(connect + " " + train + " --quiet --checkpoint-dir " + dir);
    for (std::string w; words >> w;)
      argv.push_back(w);
    kill9_after_checkpoints(argv, dir, checkpoints);
    for (auto* n : nodes)
      CHECK_MESSAGE(n->wait_log("is gone", std::chrono::seconds(10)), n->log());
  }
};

// A one-worker shard of two dense and two sparse keys spawned on `h`'s node
// as shard:0; fails the test if the spawn fails.
inline caf::actor spawn_small_shard(const node_handle& h, std::chrono::milliseconds patience) {
  parameter_shard_config s;
  s.core.num_workers = 1;
  s.core.dense = {0, 2};
  s.core.sparse = {2, 2};
  s.initial_dense = {0, 0};
  auto shard = spawn_on(h, make_spawn_request(s), patience);
  REQUIRE_MESSAGE(shard, describe(shard.error()));
  return *shard;
}

}  // namespace keel::test
