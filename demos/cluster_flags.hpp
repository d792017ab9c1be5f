#pragma once
// keel cluster's own flags (those of keel train pass through to it):
// parsed, checked together, and its --help.

#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/cluster/node_address.hpp"
#include "actors/net/tls.hpp"
#include "commands.hpp"

namespace keel::cli {

struct cluster_flags {
  uint32_t nodes = 3;
  bool respawn = false;
  bool no_data_plane = false;
  bool peer_copy = false;
  bool pre_copy = true;
  bool application_loop = false;      // the workers' loops run in client processes
  uint32_t client_wait_ms = 120000;
  uint32_t heartbeat_ms = 200;
  uint32_t timeout_ms = 800;
  uint32_t node_wait_ms = 30000;
  uint32_t worker_slots = 0;  // 0: no bound
  std::vector<node_address> connect;  // use these nodes, start none
  std::string secret_file;            // with --connect
  std::string fault_command;          // carries out node faults (else signals, for started nodes)
  std::optional<uint16_t> admin_port; // serve the admin endpoint (0: the OS picks)
  std::string admin_address = "127.0.0.1";
  tls_files tls;                      // TLS for every link (and the nodes started)
  args rest;                          // for keel train
};

extern const char* cluster_help;

// keel cluster's flags; the rest (keel train's) in `rest`. Errors name the
// flag and what is wrong with its value.
caf::expected<cluster_flags> parse_cluster_flags(const args& a);

// Usage the flags cannot express alone; a status (2) when it is wrong,
// after a line on standard error naming it.
std::optional<int> check_usage(const cluster_flags& f);

}  // namespace keel::cli
