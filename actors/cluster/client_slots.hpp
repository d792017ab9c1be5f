#pragma once
// The workers whose training loops a client process runs
// (keel::cluster_client, actors/cluster/cluster_client.hpp): one
// client_channel each (actors/core/client_channel.hpp), which outlives the
// worker's incarnations as in a job of one process. The node agent of the
// client process attaches a worker the job's coordinator starts here to its
// channel (node_spawn.cpp), and notes the job's model and step count, which
// the application's ps_client needs and learns only then.
// Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace keel {

class client_channel;
class model;

class client_slots {
 public:
  // The loops of `workers` (distinct).
  explicit client_slots(const std::vector<uint32_t>& workers);

  std::vector<uint32_t> workers() const;
  // Worker `w`'s channel; null when this process does not run its loop.
  std::shared_ptr<client_channel> channel(uint32_t w) const;

  // The coordinator started worker `w` here, for a job of `steps` steps
  // training `m`; an incarnation of it ended.
  void started(uint32_t w, std::shared_ptr<const model> m, uint64_t steps);
  void stopped(uint32_t w);

  struct job_of_worker {
    std::shared_ptr<const model> training_model;
    uint64_t steps = 0;
  };
  // What started() said for `w`, once it has: waits up to `timeout`.
  // Errors: not_found (not a worker of this process), timeout, and the
  // close() reason.
  caf::expected<job_of_worker> wait_started(uint32_t w, std::chrono::milliseconds timeout) const;

  // Waits up to `timeout` until every worker here was started, ran its
  // last step and is no longer running (the job let it go). Errors:
  // timeout naming the workers not released.
  caf::error wait_released(std::chrono::milliseconds timeout) const;
  // Whether a worker of this process runs now.
  bool any_running() const;

  // The process leaves: every channel's open and later requests fail with `why`.
  void close(const caf::error& why);

 private:
  struct slot {
    std::shared_ptr<client_channel> channel;
    std::shared_ptr<const model> training_model;
    uint64_t steps = 0;
    uint32_t running = 0;  // incarnations up now
  };
  bool released(const slot& s) const;  // locked
  mutable std::mutex m_;
  mutable std::condition_variable changed_;
  std::map<uint32_t, slot> slots_;
  caf::error closed_;
};

}  // namespace keel
