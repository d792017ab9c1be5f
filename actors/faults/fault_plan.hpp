#pragma once
// A fault plan is a seeded, replayable list of faults to inject into a
// running job. It serialises to a short text a user can paste back
// (`keel train --faults TEXT`, or parse_fault_plan and job_config::faults.plan in
// the embedding API); a job's report records the faults it injected.
//
// Each fault is KIND:TARGET@WHEN, where WHEN is
//   40          a training step: when every worker has completed 40 steps
//   1500ms      a time: 1.5 s after the job started
//   push=200    a message count: when the 200th push crosses a link
//               (push, pull, status, ack, reply, snapshot, update)
//
//   kill:shard:0@40            kill an actor (shard:N, worker:N, checkpointer,
//                              shards, workers, root) with CAF's kill
//   exit:worker:1@40           make it quit with an error (a crash reason)
//   throw:shard:1@40           make it throw from a handler (shard, worker,
//                              checkpointer)
//   drop:worker:1@55x3         drop the next 3 messages on worker:1's links
//   drop:worker:1>shard:0@55   ... only those from worker:1 to shard:0
//   dup:shard:0>worker:0@60x2  deliver the next 2 acks/replies twice
//   delay:*>worker:1@70x5+20ms deliver the next 5 messages to worker:1 20 ms late
//   reorder:worker:0>shard:1@ack=30x2
//                              deliver each of the next 2 messages after the
//                              one that follows it on its link
//   drop:shard:1>checkpointer@push=100
//                              lose shard:1's next snapshot
//   drop:directory>worker:0@20 lose worker:0's next directory update
//   enospc:write@80            fail the next checkpoint file write (ENOSPC)
//   eio:fsync@90               fail the next fsync (EIO)
//   enospc:write@80x50         fail the next 50 writes (storage that stays broken)
//   eio:fsync@80+10000ms       fail every fsync for 10 s from step 80
//   tear:write@95              tear the next checkpoint write (it claims success)
//   flip:snapshot@99           flip a bit in the newest stored snapshot file
//   kill9:node:1@40            kill node 1's whole process with SIGKILL
//                              (a job over node processes whose owner carries
//                              node faults out: keel cluster, job_config::faults.node_faults)
//   crash:node:1@40            make node 1's process kill itself with SIGKILL
//                              in the middle of its next checkpoint file
//                              write (half its bytes stored): lost mid-write
//   stop:node:1@40             stop it with SIGSTOP (a hung node) for good
//   cut:node:1@40+3000ms       stop it for 3000 ms, then SIGCONT: a partition
//                              that heals after the cluster replaced the node
//   partition:node:1@40+3000ms cut node 1 off the network for 3000 ms (from
//                              the coordinator and every node)
//   split:node:1@40+3000ms     cut it off from the coordinator only: the
//                              other nodes still reach both
//   oneway:node:1@40+3000ms    drop what node 1 sends; it still receives
//                              (these three need a harness that owns the
//                              nodes' network: scripts/netns-cluster.sh)
//
// actors/faults/link_faults.hpp lists the links keel's messages travel.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/core/fault_kind.hpp"

namespace keel {

// The kinds of message that cross a job's links.
enum class msg_kind : uint8_t { push, pull, status, ack, reply, snapshot, update };
constexpr size_t msg_kind_count = 7;
const char* to_string(msg_kind k);

// When a fault fires.
enum class trigger : uint8_t { step, time, messages };

struct fault {
  fault_kind kind = fault_kind::kill;
  std::string target;    // actor; a link ("A>B", "A", "*>B"); "write" / "fsync"; "snapshot"
  uint64_t at_step = 0;  // trigger::step: the step; time: milliseconds; messages: the count
  uint32_t count = 1;    // messages affected (drop, dup, delay, reorder); operations failed (enospc, eio)
  uint32_t delay_ms = 0; // delay; how long a node fault lasts, or an enospc or eio
  trigger when = trigger::step;
  msg_kind of = msg_kind::push;  // trigger::messages: which messages are counted

  bool is_message_fault() const {
    return kind == fault_kind::drop || kind == fault_kind::duplicate || kind == fault_kind::delay ||
           kind == fault_kind::reorder;
  }
  bool is_kill() const {
    return kind == fault_kind::kill || kind == fault_kind::exit || kind == fault_kind::raise;
  }
  bool is_node_fault() const {
    return kind == fault_kind::kill9 || kind == fault_kind::stop || kind == fault_kind::cut ||
           kind == fault_kind::crash || is_network_fault() || is_membership();
  }
  // drain, join: a membership change, carried out as node faults are.
  bool is_membership() const { return kind == fault_kind::drain || kind == fault_kind::join; }
  // partition, split, oneway: a node fault on the network, healing after delay_ms.
  bool is_network_fault() const {
    return kind == fault_kind::partition || kind == fault_kind::split || kind == fault_kind::oneway;
  }
};

caf::expected<std::vector<fault>> parse_fault_plan(const std::string& text);

// How many messages a run's message faults hit, by what they did to them.
struct message_fault_hits {
  uint64_t dropped = 0;
  uint64_t duplicated = 0;
  uint64_t delayed = 0;
  uint64_t reordered = 0;
  friend bool operator==(const message_fault_hits& a, const message_fault_hits& b) {
    return a.dropped == b.dropped && a.duplicated == b.duplicated && a.delayed == b.delayed &&
           a.reordered == b.reordered;
  }
};

// A kill of `actor` (an actor or supervisor name) once every worker has
// completed `step` steps: the fault `kill:ACTOR@STEP`.
fault kill_at(std::string actor, uint64_t step);

// The CLI's --kill shorthand, "shard:0@step=40,worker:1@90": each item is a
// kill fault (`@step=N` and `@N` both mean at step N); "node:N@S" is kill9. The error names the
// bad item.
caf::expected<std::vector<fault>> parse_kill_shorthand(const std::string& text);
std::string to_string(const fault& f);
std::string to_string(const std::vector<fault>& plan);

// What a random plan may contain.
struct fault_mix {
  uint32_t faults = 4;           // how many
  uint64_t first_step = 5;       // faults fall in [first_step, last_step]
  uint64_t last_step = 50;
  uint32_t shards = 2;
  uint32_t workers = 2;
  bool kills = true;
  bool supervisors = true;       // kill shards / workers / root too
  bool messages = true;
  bool storage = true;
  bool timed = true;             // some faults fire at a time or a message count
  // Node faults (family "nodes"), for a job over `nodes` node processes:
  // kill9 (the cluster should restart the node), cut (+200..1500 ms), and
  // at most one stop per plan, so that some node always comes back.
  bool node_faults = false;
  uint32_t nodes = 0;
  // Membership changes (family "membership"), drawn after every fault so
  // that a seed's faults stay what they were: `changes` joins and drains,
  // at most 2 joins (node:nodes, node:nodes+1, in the order of their steps)
  // and at most nodes - 2 drains of the starting nodes, so that one stopped
  // node still leaves a node to move to.
  bool membership = false;
  uint32_t changes = 2;
};

// Checks a message fault's target ("A>B", "A", with "*" for either end)
// against the links of actors/faults/link_faults.hpp; the error names the target.
caf::error check_link_target(const std::string& target);

// Checks that every target of `plan` exists in a job of `shards` shards,
// `workers` workers and `nodes` node processes (0: the job runs in one
// process); the error names the fault.
caf::error check_fault_plan(const std::vector<fault>& plan, uint32_t shards, uint32_t workers,
                            uint32_t nodes = 0);

// Sets which families a random plan draws from: a comma-separated subset of
// kills, supervisors, messages, storage, timed, nodes, membership (or
// "all", which is every family but nodes and membership); the error names
// an unknown family.
caf::error parse_fault_families(const std::string& text, fault_mix& mix);

// A plan drawn from `seed`: the same seed and mix give the same plan.
std::vector<fault> random_fault_plan(uint64_t seed, const fault_mix& mix);

}  // namespace keel
