#include "cluster_flags.hpp"

#include <iostream>
#include <sstream>

#include "actors/core/fault_kind.hpp"
#include "messages/errors.hpp"

namespace keel::cli {

const char* cluster_help =
  "keel cluster: train across keel node processes: N started on this machine, or running\n"
  "  ones anywhere (--connect); node faults by real signals, the recovery timeline printed\n"
  "  --nodes N (=3)                 keel node processes to start on 127.0.0.1\n"
  "  --respawn-nodes                start a node killed with kill9 again, on its port\n"
  "  --no-data-plane                the nodes carry pushes and pulls over CAF's middleman\n"
  "                                 instead of their data plane (for comparison)\n"
  "  --peer-copy                    keep each shard's newest checkpoint chain in its peer\n"
  "                                 node's memory too; a restart there reads it first.\n"
  "                                 Off: the copies travel between nodes through the\n"
  "                                 coordinator's middleman (nodes are not joined)\n"
  "  --no-pre-copy                  a shard's move restores it on its new node after\n"
  "                                 stopping it (by default that node restores the\n"
  "                                 shard's newest checkpoint first, while it serves)\n"
  "  --node-heartbeat-ms MS (=200)  the middleman's heartbeat between processes\n"
  "  --node-timeout-ms MS (=800)    a silent (stopped) node counts as lost after this\n"
  "  --node-wait-ms MS (=30000)     with every node lost, how long the job waits for one\n"
  "                                 (respawned, restarted, added) before it fails; a worker\n"
  "                                 as long for a free slot (or its client) before it leaves\n"
  "                                 the job, with --workers MIN:MAX, or fails it\n"
  "  --worker-slots N (=0)          at most N workers on a node (0: no bound): after a node's\n"
  "                                 loss its workers take free slots on the others, and with\n"
  "                                 --workers MIN:MAX (e.g. 2:4) those left without one leave\n"
  "                                 the job, which rolls back to its newest checkpoint and goes\n"
  "                                 on with fewer workers, never fewer than MIN\n"
  "  --connect [NAME@]HOST:PORT,... use running keel node processes; start none\n"
  "                                 (node faults are then yours to send); with TLS,\n"
  "                                 NAME (default HOST) is what the node's certificate states\n"
  "  --secret-file FILE             the cluster secret (with --connect: the nodes'; else\n"
  "                                 the nodes started get it; default with --connect\n"
  "                                 $KEEL_CLUSTER_SECRET, else a fresh one)\n"
  "  --application-loop             every worker runs an application's own training loop\n"
  "                                 in a client process (keel::cluster_client, Python\n"
  "                                 keel.connect) that joins a node with the secret;\n"
  "                                 training begins once a client runs each worker's loop\n"
  "  --client-wait-ms MS (=120000)  how long the job waits for those clients to join\n"
  "  --admin-port PORT              serve the admin endpoint there while training (0: the OS\n"
  "                                 picks): keel admin status, drain, move, add (keel admin --help)\n"
  "  --admin-address IP (=127.0.0.1) the address --admin-port binds\n"
  "  --node-fault-command CMD       carry out node faults by running CMD KIND N MS (a harness\n"
  "                                 that owns the nodes, e.g. scripts/netns-cluster.sh);\n"
  "                                 needed for partition, split and oneway\n"
  "  --tls-cert FILE --tls-key FILE --tls-ca FILE\n"
  "                                 TLS on every link, certificates verified both ways\n"
  "                                 (scripts/make-dev-certs.sh makes a CA and certificates);\n"
  "                                 started nodes use the same certificate and key\n"
  "  every keel train flag          (keel train --help), e.g. --model, --steps, --kill,\n"
  "                                 --faults with node faults kill9:node:N@STEP,\n"
  "                                 stop:node:N@STEP, cut:node:N@STEP+MSms,\n"
  "                                 crash:node:N@STEP (SIGKILL mid-way through its next\n"
  "                                 checkpoint file write; its shards write their own) (and, with\n"
  "                                 --node-fault-command, partition:, split:, oneway:node:N@STEP+MSms),\n"
  "                                 and membership changes join:node:N@STEP (N: the next index;\n"
  "                                 a new node joins, shards and workers move to it) and\n"
  "                                 drain:node:N@STEP (its children move away, then it is released)\n";

namespace {

caf::expected<uint32_t> number(const std::string& flag, const args& a, size_t& i, uint32_t lo, uint32_t hi) {
  if (i + 1 >= a.size())
    return make_error(errc::invalid_argument, flag + ": missing value (see keel cluster --help)");
  auto& v = a[++i];
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(v) < lo || std::stoul(v) > hi)
    return make_error(errc::invalid_argument, flag + ": '" + v + "' is not a number in " + std::to_string(lo) +
                                                ".." + std::to_string(hi) + " (see keel cluster --help)");
  return static_cast<uint32_t>(std::stoul(v));
}

// "[NAME@]HOST:PORT,...": every port 1..65535, no empty host.
caf::expected<std::vector<node_address>> addresses(const std::string& text) {
  std::vector<node_address> out;
  size_t from = 0;
  while (from <= text.size()) {
    auto comma = text.find(',', from);
    std::string why;
    auto a = parse_node_address(text.substr(from, comma == std::string::npos ? std::string::npos : comma - from), why);
    if (!a)
      return make_error(errc::invalid_argument, "--connect: " + why + " (see keel cluster --help)");
    out.push_back(*a);
    if (comma == std::string::npos)
      break;
    from = comma + 1;
  }
  return out;
}

}  // namespace

caf::expected<cluster_flags> parse_cluster_flags(const args& a) {
  cluster_flags f;
  for (size_t i = 0; i < a.size(); ++i) {
    auto& x = a[i];
    caf::expected<uint32_t> n{0u};
    if (x == "--nodes" && (n = number(x, a, i, 1, 64)))
      f.nodes = *n;
    else if (x == "--node-heartbeat-ms" && (n = number(x, a, i, 10, 60000)))
      f.heartbeat_ms = *n;
    else if (x == "--node-timeout-ms" && (n = number(x, a, i, 50, 600000)))
      f.timeout_ms = *n;
    else if (x == "--node-wait-ms" && (n = number(x, a, i, 0, 3600000)))
      f.node_wait_ms = *n;
    else if (x == "--worker-slots" && (n = number(x, a, i, 0, 1024)))
      f.worker_slots = *n;
    else if (x == "--admin-port" && (n = number(x, a, i, 0, 65535)))
      f.admin_port = static_cast<uint16_t>(*n);
    else if (x == "--respawn-nodes")
      f.respawn = true;
    else if (x == "--no-data-plane")
      f.no_data_plane = true;
    else if (x == "--peer-copy")
      f.peer_copy = true;
    else if (x == "--no-pre-copy")
      f.pre_copy = false;
    else if (x == "--application-loop")
      f.application_loop = true;
    else if (x == "--client-wait-ms" && (n = number(x, a, i, 0, 3600000)))
      f.client_wait_ms = *n;
    else if ((x == "--connect" || x == "--secret-file" || x == "--tls-cert" || x == "--tls-key" || x == "--tls-ca" ||
              x == "--node-fault-command" || x == "--admin-address") &&
             i + 1 >= a.size())
      return make_error(errc::invalid_argument, x + ": missing value (see keel cluster --help)");
    else if (x == "--connect") {
      auto nodes = addresses(a[++i]);
      if (!nodes)
        return nodes.error();
      f.connect = std::move(*nodes);
    } else if (x == "--secret-file")
      f.secret_file = a[++i];
    else if (x == "--admin-address")
      f.admin_address = a[++i];
    else if (x == "--node-fault-command") {
      f.fault_command = a[++i];
      if (f.fault_command.empty())
        return make_error(errc::invalid_argument, "--node-fault-command: empty command (see keel cluster --help)");
    } else if (x == "--tls-cert")
      f.tls.cert = a[++i];
    else if (x == "--tls-key")
      f.tls.key = a[++i];
    else if (x == "--tls-ca")
      f.tls.ca = a[++i];
    else if (x == "--nodes" || x == "--node-heartbeat-ms" || x == "--node-timeout-ms" || x == "--node-wait-ms" ||
             x == "--admin-port" || x == "--client-wait-ms" || x == "--worker-slots")
      return n.error();
    else
      f.rest.push_back(x);
  }
  return f;
}

namespace {

// Whether the plan in `rest` (--kill, --faults) names a node for a fault
// that needs its process (a drain only moves children: any cluster can).
bool names_a_node_fault(const args& rest) {
  for (size_t i = 0; i + 1 < rest.size(); ++i) {
    if (rest[i] != "--kill" && rest[i] != "--faults")
      continue;
    std::istringstream items(rest[i + 1]);
    for (std::string item; std::getline(items, item, ',');)
      if (item.find("node:") != std::string::npos && item.rfind("drain:", 0) != 0)
        return true;
  }
  return false;
}

// Whether the plan in `rest` (--faults) holds a network fault (partition, split, oneway).
bool names_a_network_fault(const args& rest) {
  for (size_t i = 0; i + 1 < rest.size(); ++i)
    if (rest[i] == "--faults")
      for (auto k : network_fault_kinds)
        if (rest[i + 1].find(std::string(to_string(k)) + ":") != std::string::npos)
          return true;
  return false;
}

}  // namespace

std::optional<int> check_usage(const cluster_flags& f) {
  bool connect = !f.connect.empty();
  bool command = !f.fault_command.empty();
  if (connect && !command && names_a_node_fault(f.rest)) {
    std::cerr << "keel cluster: node faults (node:N) need nodes this keel cluster started, or "
                 "--node-fault-command; with --connect, signal the node processes yourself "
                 "(drains need neither)\n";
    return 2;
  }
  if (!command && names_a_network_fault(f.rest)) {
    std::cerr << "keel cluster: partition, split and oneway need --node-fault-command (a harness that "
                 "owns the nodes' network, e.g. scripts/netns-cluster.sh)\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace keel::cli
