#pragma once
// The two ends of a running cluster's admin endpoint
// (actors/cluster/cluster_admin.hpp): keel cluster serves it with
// --admin-port (serve_admin), and `keel admin` (admin() in commands.hpp)
// asks it for the status and for drains, moves and joins.

#include <cstdint>
#include <memory>
#include <string>

#include "actors/cluster/cluster_placement.hpp"
#include "actors/metrics/metrics_http.hpp"
#include "actors/net/cluster_secret.hpp"

namespace keel::cli {

// Serves `placement`'s admin endpoint at address:port (port 0: the OS
// picks) for requests that prove `secret`; each request the cluster
// carries out is a membership event in the job's timeline. Null and
// `error` set when it cannot bind.
std::unique_ptr<metrics_http_server> serve_admin(std::shared_ptr<cluster_placement> placement, cluster_secret secret,
                                                 const std::string& address, uint16_t port, std::string& error);

}  // namespace keel::cli
