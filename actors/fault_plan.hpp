#pragma once
// A fault plan is a seeded, replayable list of faults to inject into a
// running job, each at a training step (when every worker has completed
// that many steps). It serialises to a short text a user can paste back
// (`keel train --faults TEXT`); a job's report records the plan it ran.
//
//   kill:shard:0@40            kill an actor (shard:N, worker:N, checkpointer,
//                              shards, workers, root) with CAF's kill
//   exit:worker:1@40           make it quit with an error (a crash reason)
//   throw:shard:1@40           make it throw from a handler (shard, worker,
//                              checkpointer)
//   drop:worker:1@55x3         drop the next 3 messages worker:1 sends
//   drop:worker:1>shard:0@55   ... only those to shard:0
//   dup:worker:0@60x2          deliver the next 2 messages twice
//   delay:worker:1@70x5+20ms   deliver the next 5 messages 20 ms late
//   enospc:write@80            fail the next checkpoint file write (ENOSPC)
//   eio:fsync@90               fail the next fsync (EIO)
//   tear:write@95              tear the next checkpoint write (it claims success)
//   flip:snapshot@99           flip a bit in the newest stored snapshot file
//
// Message faults sit where workers send their capnp pushes and pulls; a
// dropped message is seen by its sender only through its request timeout.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace keel {

enum class fault_kind { kill, exit, raise, drop, duplicate, delay, enospc, eio, tear, flip };

struct fault {
  fault_kind kind = fault_kind::kill;
  std::string target;    // actor; "worker:N" or "worker:N>shard:M"; "write" / "fsync"; "snapshot"
  uint64_t at_step = 0;
  uint32_t count = 1;    // messages affected (drop, dup, delay)
  uint32_t delay_ms = 0; // delay
};

caf::expected<std::vector<fault>> parse_fault_plan(const std::string& text);
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
};

// A plan drawn from `seed`: the same seed and mix give the same plan.
std::vector<fault> random_fault_plan(uint64_t seed, const fault_mix& mix);

}  // namespace keel
