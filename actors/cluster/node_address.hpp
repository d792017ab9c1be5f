#pragma once
// Where a keel node's gate listens, as keel cluster --connect, keel node
// --join and a cluster_client name it. Public (installed): no CAF types.

#include <cstdint>
#include <optional>
#include <string>

namespace keel {

struct node_address {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string tls_name;  // with TLS: the name its certificate must state (empty: host)
  const std::string& identity() const { return tls_name.empty() ? host : tls_name; }
};

// "[NAME@]HOST:PORT" (a port in 1..65535, a host and a name not empty), or
// nothing with `why` naming the text and what is wrong with it.
std::optional<node_address> parse_node_address(const std::string& text, std::string& why);

}  // namespace keel
