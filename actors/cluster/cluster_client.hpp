#pragma once
// A cluster_client runs the training loops of some of a cluster job's
// workers in the application's own process: the job runs on `keel cluster`
// (its coordinator, with --application-loop) and `keel node` processes,
// and this process joins one of the job's nodes as a client, authenticated
// as a node is (the cluster secret's challenge at the node's gate, then the
// agent's handshake; TLS with certificates when configured).
//
//   keel::cluster_client_config cc;
//   cc.join = {"127.0.0.1", 7001};                  // a node of the job
//   cc.secret = *keel::cluster_secret::from_file_or_env("secret");
//   cc.workers = {0};                                // the loops this process runs
//   auto cluster = keel::cluster_client::connect(cc);
//   auto c = (*cluster)->client(0, std::chrono::minutes(2));   // a ps_client
//   ... the same loop as with job::client (actors/job/ps_client.hpp) ...
//   (void)(*cluster)->wait_released(std::chrono::minutes(5));
//
// How it works: the process runs a node agent of its own behind a gate
// (actors/cluster/node_agent.hpp), which announces only the workers whose
// loops it runs. The coordinator finds it among the nodes that joined its
// members and starts each of those workers here, and only here
// (actors/cluster/placement_policy.hpp); the worker actor is keel's own (its
// replay log, retries, re-routing to restarted shards, the checkpoint
// window), attached to the application's loop by a client_channel, as in a
// job of one process. A client process that dies is a worker that died:
// the job restarts the worker once a client serving it joins again (a new
// process: it asks next_step() and goes on at the step the shards say),
// and the job fails, naming the worker, when none has for
// `keel cluster --node-wait-ms`.
//
// Leaving: a worker stays up after its last step with its replay log, for
// shards that restart before the job has read the final parameters; the
// job lets it go when it ends. wait_released() waits for that. A client
// destroyed before then takes its running workers down as a failure (the
// job restarts them in a client that joins again).
//
// Public (installed with <keel/keel.hpp>, linked as keel::keel).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/cluster/node_address.hpp"
#include "actors/job/ps_client.hpp"
#include "actors/net/cluster_secret.hpp"
#include "actors/net/tls.hpp"

namespace keel {

struct cluster_client_config {
  node_address join;              // a node of the job (keel cluster prints them)
  cluster_secret secret;          // the cluster's (keel cluster prints where it keeps it)
  std::vector<uint32_t> workers;  // the workers whose loops this process runs (distinct, not empty)
  // Where this process's gate listens: the coordinator and the nodes
  // connect to it (an address they reach; port 0: any).
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  // TLS on every link (null: none), as keel node --tls-*.
  std::shared_ptr<const tls_context> tls;
  bool data_plane = true;                 // pushes and pulls on the nodes' data planes
  std::filesystem::path data_dir;         // where models built here find their data (empty: keel's default)
  // The middleman's heartbeat and a silent peer's timeout, as the cluster's
  // (keel cluster --node-heartbeat-ms, --node-timeout-ms).
  std::chrono::milliseconds heartbeat_interval{200};
  std::chrono::milliseconds connection_timeout{800};
  std::chrono::milliseconds connect_timeout{10000};
  // One line per event (joins, spawns); thread-safe. Null: standard error,
  // prefixed "keel client: ".
  std::function<void(const std::string&)> log;
};

class cluster_client {
 public:
  // Starts the process's agent and gate and joins cfg.join. Errors:
  // invalid_argument (no workers, a worker twice, no secret), and the
  // join's (not_authenticated: another secret; timeout).
  static caf::expected<std::unique_ptr<cluster_client>> connect(cluster_client_config cfg);

  // The client of worker `worker` once the coordinator has started it here
  // (then the job's model and step count are known): waits up to
  // `timeout`. Errors: not_found (not one of cfg.workers), timeout.
  caf::expected<ps_client> client(uint32_t worker, std::chrono::milliseconds timeout);

  // Waits until the job has let every worker of this process go (it ended,
  // or its coordinator is gone), after each ran its last step. Errors:
  // timeout, saying which still run.
  caf::error wait_released(std::chrono::milliseconds timeout);

  // Where this process's gate listens, and its CAF node id.
  uint16_t port() const;
  std::string node() const;

  ~cluster_client();
  cluster_client(const cluster_client&) = delete;
  cluster_client& operator=(const cluster_client&) = delete;

  struct impl;

 private:
  explicit cluster_client(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace keel
