#pragma once
// link_faults holds the message faults armed on a job's links and counts the
// messages that cross them. A link is a direction between two named actors;
// these carry keel's messages:
//
//   worker:N > shard:M       push, pull, status (requests)
//   shard:M > worker:N       ack, reply (the answers to pushes and pulls)
//   shard:M > checkpointer   snapshot
//   directory > worker:N     update (a shard's new incarnation)
//
// A fault targets one link ("worker:0>shard:1"), every link of one actor
// ("shard:1": both directions), or uses "*" for either end ("*>worker:0").
// It drops, duplicates, delays or reorders the next N messages on matching
// links. The actors consult this object through their link_ends
// (actors/faults/link_ends.hpp), where they send and receive those messages,
// so a dropped request is noticed by its sender only through its timeout, as
// on a real network.
// Thread-safe: actors on any scheduler thread share one instance with the
// job's thread; with nothing armed or watched, a message costs two atomic
// operations.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "actors/faults/fault_plan.hpp"

namespace keel {

enum class send_action { deliver, drop, duplicate, delay, reorder };

struct send_decision {
  send_action action = send_action::deliver;
  uint32_t delay_ms = 0;
};

class link_faults {
 public:
  // Arms a drop, dup, delay or reorder fault; other kinds are refused.
  caf::error arm(const fault& f);

  // Counts one message of `kind` from `from` to `to` and says what to do
  // with it; consumes one count of the oldest matching armed fault.
  send_decision on_message(const std::string& from, const std::string& to, msg_kind kind);

  // Messages of `kind` seen so far.
  uint64_t count(msg_kind kind) const;

  // Calls `fire` once, from whichever thread counts it, when the count of
  // `kind` reaches `n` (at once if it already has).
  void at_count(msg_kind kind, uint64_t n, std::function<void()> fire);

  // Faults armed and not yet used up.
  size_t pending() const;

  // Messages each action hit so far: dropped, duplicated, delayed, reordered.
  message_fault_hits hits() const;

 private:
  struct armed {
    std::string from, to;  // "*" matches any actor
    bool either = false;   // a single-actor target: matches both directions
    send_action action;
    uint32_t remaining;
    uint32_t delay_ms;
  };
  struct watch {
    msg_kind kind;
    uint64_t at;
    std::function<void()> fire;
  };
  void fire_watches(msg_kind kind, uint64_t now);

  mutable std::mutex mtx_;
  std::vector<armed> armed_;
  std::vector<watch> watches_;
  std::atomic<size_t> busy_{0};  // armed_ + watches_ entries
  std::array<std::atomic<uint64_t>, msg_kind_count> counts_{};
  message_fault_hits hits_;
};

}  // namespace keel
