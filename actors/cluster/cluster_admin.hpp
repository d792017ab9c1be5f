#pragma once
// A running cluster's admin endpoint: an operator sees where everything
// runs and asks for membership changes while the job trains (keel cluster
// --admin-port serves it, `keel admin` speaks it). HTTP, one request per
// connection, on keel's bounded HTTP server (actors/metrics/metrics_http.hpp):
//   GET  /admin/status                        200: the placement as JSON
//   POST /admin/drain?node=node:N             202: node N drains, then is released
//   POST /admin/move?child=shard:S&to=node:N  202: the move is queued
//   POST /admin/add?address=HOST:PORT[&name=TLSNAME]
//                                             200: the keel node there joined the job
//   POST /admin/workers?join=worker:W   (or leave=worker:W)
//                                             200: the job's workers changed from the step named
//                                             (job::change_workers; W held in reserve to join)
// Every request proves it knows the cluster secret, as nodes do: header
// `X-Keel-Admin: <unix seconds> <nonce> <hex HMAC-SHA256>` over the method
// and the target (path and query) with the time and a random nonce as the
// challenge (cluster_secret::prove, label "keel-admin"). A request more
// than `window` away from the server's clock, or one whose proof was seen
// already (kept for twice the window), is refused with 401, as is one
// without a valid proof: so a recorded request cannot be replayed, the
// same request made twice is two requests, and the secret never crosses
// the network. Requests the cluster refuses (a node
// that is not one, a child already there) get 409 naming why; malformed
// ones 400; other paths 404; other methods 405.
// Not thread-safe: the server calls it from its one thread. Served by
// serve_cluster_admin, a flood of connections without a request (or
// without a proof) cannot keep an operator out: they give way to newer
// ones, while a proved request's answer keeps its slot.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <caf/error.hpp>

#include "actors/cluster/cluster_placement.hpp"
#include "actors/core/actor_id.hpp"
#include "actors/metrics/metrics_http.hpp"
#include "actors/net/cluster_secret.hpp"

namespace keel {

// What the endpoint asks of the cluster (keel cluster binds these to its
// cluster_placement, announcing each request in the job's timeline).
struct cluster_admin_ops {
  std::function<std::string()> status;  // JSON
  std::function<caf::error(uint32_t node)> drain;
  std::function<caf::error(actor_id child, uint32_t node)> move;
  // The reply's text on success (which node it became, the moves planned).
  std::function<caf::expected<std::string>(const node_address& address)> add;
  // "join:worker:W" or "leave:worker:W": the step the change takes effect at.
  std::function<caf::expected<uint64_t>(const std::string& item)> workers;
};

// The value of the X-Keel-Admin header for `method` `target` at
// `unix_seconds`, with a fresh random nonce, or with `nonce`.
std::string admin_proof(const cluster_secret& secret, const std::string& method, const std::string& target,
                        int64_t unix_seconds);
std::string admin_proof(const cluster_secret& secret, const std::string& method, const std::string& target,
                        int64_t unix_seconds, const std::string& nonce);

class cluster_admin {
 public:
  cluster_admin(cluster_secret secret, cluster_admin_ops ops, std::chrono::seconds window = std::chrono::seconds(60))
      : secret_(std::move(secret)), ops_(std::move(ops)), window_(window) {}

  // The whole HTTP response to one request head, at `now` (unix seconds).
  std::string respond(const std::string& request_head, int64_t now);

 private:
  cluster_secret secret_;
  cluster_admin_ops ops_;
  std::chrono::seconds window_;
  std::map<std::string, int64_t> seen_;  // proofs accepted -> when
};

// Serves `admin` at address:port (port 0: the OS picks) on keel's bounded
// HTTP server (at most 8 connections; actors/metrics/metrics_http.hpp),
// answering at the wall clock's time. Null and `error` set when it cannot
// bind.
std::unique_ptr<metrics_http_server> serve_cluster_admin(std::shared_ptr<cluster_admin> admin,
                                                         const std::string& address, uint16_t port,
                                                         std::string& error);

}  // namespace keel
