#pragma once
// What a fault does, as a value: the fault plan (actors/faults/fault_plan.hpp)
// schedules faults of these kinds, a job_event reports which kind it
// injected, the metrics count injections by it, and a node fault's owner
// (job_config::faults.node_faults) is told which to carry out. Its text ("kill",
// "throw", "kill9") is a plan's spelling and a metric's label value, used at
// those edges only.

#include <cstdint>
#include <optional>
#include <string_view>

namespace keel {

enum class fault_kind : uint8_t {
  kill, exit, raise, drop, duplicate, delay, reorder, enospc, eio, tear, flip,
  kill9, stop, cut, crash,    // node faults
  partition, split, oneway,   // node faults on the network (network_fault_kinds)
  drain, join                 // membership changes (membership_kinds)
};

// Every kind, in declaration order (random plans draw from it: the order is
// part of what a seed means).
constexpr fault_kind all_fault_kinds[] = {
  fault_kind::kill,    fault_kind::exit,   fault_kind::raise, fault_kind::drop,  fault_kind::duplicate,
  fault_kind::delay,   fault_kind::reorder, fault_kind::enospc, fault_kind::eio, fault_kind::tear,
  fault_kind::flip,    fault_kind::kill9,  fault_kind::stop,  fault_kind::cut};

// A node fault carried out inside the node: `crash` arms node N's process
// to kill itself with SIGKILL in the middle of its next checkpoint file
// write (half of that write's bytes stored): a node lost mid-write,
// deterministically (a kill9 from outside lands wherever it lands). Random
// plans never draw it (all_fault_kinds above is what a seed means).
constexpr fault_kind in_node_fault_kinds[] = {fault_kind::crash};

// The network's node faults, which only a harness that owns the nodes'
// network carries out (scripts/netns-cluster.sh, through keel cluster
// --node-fault-command): `partition` cuts a node off from every peer,
// `split` from the coordinator only (the other nodes still see both),
// `oneway` drops what the node sends while it still receives. Each heals
// after its +MSms. Random plans never draw them (all_fault_kinds above is
// what a seed means).
constexpr fault_kind network_fault_kinds[] = {fault_kind::partition, fault_kind::split,
                                              fault_kind::oneway};

// Membership changes a plan schedules beside faults (a cluster's
// placement carries them out; they are no faults, but share the plan's
// triggers, its order and its events): `drain` moves a node's shards and
// workers to the others, then releases it; `join` adds node N (the next
// index) to the running job, which then moves shards and workers to it
// until the cluster is balanced.
constexpr fault_kind membership_kinds[] = {fault_kind::drain, fault_kind::join};

// The kind as a plan spells it ("throw" for raise, "dup" for duplicate).
const char* to_string(fault_kind k);
// The inverse of to_string; empty for any other text.
std::optional<fault_kind> parse_fault_kind(std::string_view text);

}  // namespace keel
