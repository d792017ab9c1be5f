#include "actors/cluster/cluster_gate_wire.hpp"

#include <cstring>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>

namespace keel::gate_wire {

namespace {

void put32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint32_t get32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::vector<unsigned char> hello(const std::string& node, const std::vector<uint8_t>& challenge) {
  std::vector<unsigned char> out(head_bytes + node.size() + challenge.size());
  std::memcpy(out.data(), gate_magic, sizeof gate_magic);
  put32(out.data() + 8, static_cast<uint32_t>(node.size()));
  std::memcpy(out.data() + head_bytes, node.data(), node.size());
  std::memcpy(out.data() + head_bytes + node.size(), challenge.data(), challenge.size());
  return out;
}

bool parse_head(const unsigned char* head, size_t& n, std::string& why) {
  if (std::memcmp(head, gate_magic, sizeof gate_magic) != 0) {
    why = "not a keel cluster handshake (a CAF client that skipped it, or another protocol)";
    return false;
  }
  n = get32(head + 8);
  if (n == 0 || n > max_node_text) {
    why =
        "a node id of " + std::to_string(n) + " bytes (1 to " + std::to_string(max_node_text) + ")";
    return false;
  }
  return true;
}

bool proof_matches(const hmac_digest& expected, const unsigned char* got) {
  return equal_in_constant_time(expected.data(), expected.size(), got, proof_bytes);
}

caf::actor basp_broker_of(caf::actor_system& sys) {
  return sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

}  // namespace keel::gate_wire
