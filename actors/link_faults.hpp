#pragma once
// link_faults holds the message faults armed on workers' links: drop,
// duplicate or delay the next N messages a worker sends (to one shard or to
// all). Workers consult it for every push and pull they send; the job arms
// it from a fault plan. Thread-safe: workers on any scheduler thread share
// one instance with the job's thread.

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "actors/fault_plan.hpp"

namespace keel {

enum class send_action { deliver, drop, duplicate, delay };

struct send_decision {
  send_action action = send_action::deliver;
  uint32_t delay_ms = 0;
};

class link_faults {
 public:
  // Arms a drop, dup or delay fault; other kinds are refused with an error.
  caf::error arm(const fault& f);

  // What to do with the next message `worker` sends to `shard`; consumes one
  // count of the oldest matching armed fault.
  send_decision on_send(uint32_t worker, uint32_t shard);

  // Faults armed and not yet used up.
  size_t pending() const;

 private:
  struct armed {
    uint32_t worker;
    std::optional<uint32_t> shard;
    send_action action;
    uint32_t remaining;
    uint32_t delay_ms;
  };
  mutable std::mutex mtx_;
  std::vector<armed> armed_;
};

}  // namespace keel
