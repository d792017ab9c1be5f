#pragma once
// The cluster gate's handshake on the wire (actors/cluster/cluster_gate.hpp has the
// protocol): constants and the few helpers both sides use. Internal to
// cluster_gate.cpp (the gate) and cluster_gate_connect.cpp (the
// connector); not part of keel's API.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/net/cluster_secret.hpp"

namespace keel::gate_wire {

inline constexpr char gate_magic[8] = {'K', 'E', 'E', 'L', 'C', 'P', '0', '1'};
inline constexpr const char* gate_label = "keel-cluster-gate-proof-v1";
inline constexpr const char* connector_label = "keel-cluster-connector-proof-v1";
inline constexpr unsigned char verdict_accepted = 'K';
inline constexpr size_t head_bytes = 12;  // magic, u32 node id length
inline constexpr size_t challenge_bytes = 32;
inline constexpr size_t proof_bytes = sizeof(hmac_digest);
inline constexpr size_t max_node_text = 256;

// magic, length, node id, challenge.
std::vector<unsigned char> hello(const std::string& node, const std::vector<uint8_t>& challenge);

// The node id length a hello's head announces in `n`; false with `why`
// when the head is refused.
bool parse_head(const unsigned char* head, size_t& n, std::string& why);

// Compares a received proof (proof_bytes) in constant time.
bool proof_matches(const hmac_digest& expected, const unsigned char* got);

// The system's BASP broker (invalid without a middleman).
caf::actor basp_broker_of(caf::actor_system& sys);

}  // namespace keel::gate_wire
