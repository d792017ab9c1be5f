#pragma once
// The inside of the worker actor, shared by worker.cpp (the training loop:
// pull, gradient, push, acks, link faults) and worker_recovery.cpp (resume
// after a restart, replay to restarted shards, rollback requests). Not part
// of the public API: see worker.hpp.

#include <caf/all.hpp>
#include <memory>
#include <string>
#include <vector>

#include "actors/job_event.hpp"
#include "actors/faults/link_hold.hpp"
#include "actors/replay_log.hpp"
#include "actors/worker.hpp"
#include "messages/decode.hpp"
#include "supervision/directory.hpp"

namespace keel::worker_detail {

using Status = schema::PushAck::Status;

enum class phase { resolving, resuming, waiting, pulling, pushing, finished, halted };

struct worker_state {
  worker_options opt;
  std::unique_ptr<model_scratch> scratch;
  replay_log log{0};
  std::vector<caf::actor> shards;
  std::vector<uint64_t> incarnation;
  phase now = phase::resolving;
  uint64_t step = 0;        // the global step in progress
  uint64_t window = 0;      // when windowed: steps below this may start
  uint64_t generation = 0;  // bumps whenever in-flight requests become stale
  uint64_t steps_per_epoch = 0;
  // The step's working set, reused from step to step.
  std::vector<uint64_t> batch, model_keys;
  std::vector<std::vector<uint64_t>> shard_keys;  // global sparse keys per shard
  std::vector<bool> done;  // per shard: pulled (pulling) or acknowledged (pushing)
  size_t pending = 0;
  std::vector<float> dense;
  std::vector<float> sparse_values;
  gradient_buffer grad;
  std::vector<uint64_t> max_acked;  // per shard
  std::vector<uint64_t> resume_from;
  worker_report report;
  held_deliveries held;  // directory updates a link fault holds back
};

using worker_actor = caf::stateful_actor<worker_state>;

// Reports an event to the job.
void emit(worker_actor* self, job_event e);  // fills in the actor
void emit(worker_actor* self, event_kind kind, std::string detail);
// The delay before retry number `attempt` (exponential, capped).
std::chrono::milliseconds backoff(const worker_options& o, uint32_t attempt);
void fail(worker_actor* self, caf::error err);

// worker.cpp: the training loop.
void start_step(worker_actor* self);
void send_pull(worker_actor* self, uint32_t shard, uint32_t attempt);
void send_push(worker_actor* self, uint32_t shard, const push_msg& m, uint32_t attempt);
void on_update(worker_actor* self, const supervision::directory_update& u);
void refresh(worker_actor* self, uint32_t shard);

// worker_recovery.cpp
void halt_for_rollback(worker_actor* self, const std::string& why);
void replay_to(worker_actor* self, uint32_t shard, uint32_t attempt);
void ask_status(worker_actor* self, uint32_t shard, uint32_t attempt);
void resume(worker_actor* self);

}  // namespace keel::worker_detail
