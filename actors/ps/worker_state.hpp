#pragma once
// The inside of the worker actor, shared by worker.cpp (the training loop:
// pull, gradient, push, acks) and worker_recovery.cpp (resume
// after a restart, replay to restarted shards, rollback requests). Not part
// of the public API: see worker.hpp.

#include <caf/all.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/core/job_event.hpp"
#include "actors/core/request_deadlines.hpp"
#include "actors/core/request_timer.hpp"
#include "actors/core/slice_wire.hpp"
#include "actors/core/worker_core.hpp"
#include "actors/data_plane/data_plane.hpp"
#include "actors/faults/link_ends.hpp"
#include "actors/ps/worker.hpp"
#include "messages/decode.hpp"
#include "supervision/directory.hpp"

namespace keel::worker_detail {

struct worker_state {
  worker_config cfg;
  worker_env env;
  worker_core core;  // the decisions; the actor performs them
  std::unique_ptr<model_scratch> scratch;
  std::vector<caf::actor> shards;           // the current incarnation of each shard
  std::vector<caf::actor> replaced;         // the one before it, until fenced (worker_recovery.cpp)
  std::vector<uint64_t> batch, model_keys;  // the step's batch, reused
  table_key_lists table_keys;               // the step's rows of each table, reused
  gradient_buffer grad;
  link_ends links;  // directory updates arrive through it, where link faults act
  std::chrono::steady_clock::time_point waiting_since;  // when the window last held a step back
  std::chrono::steady_clock::time_point paused_since;   // when backpressure last paused a step
  // The next step's pull to each shard, asked early (worker.cpp,
  // ask_early_pulls): for which step, of which incarnation, and its reply
  // once it came before that step started pulling. clock 0: none out.
  struct early_pull {
    uint64_t clock = 0;
    caf::actor handle;
    std::optional<pull_reply_msg> reply;
  };
  std::vector<early_pull> early;
  request_deadlines deadlines;  // of the requests to shards (ask_shard)
  // With an application's loop (worker_env::channel): this incarnation's
  // token, and what the step waits for from the application.
  uint64_t channel_token = 0;
  enum class client_wait { none, keys, gradient } awaiting = client_wait::none;
};

using worker_actor = caf::stateful_actor<worker_state>;

// Reports an event to the job.
void emit(worker_actor* self, job_event e);  // fills in the actor
void emit(worker_actor* self, event_kind kind, std::string detail);
// The delay before retry number `attempt` (exponential, capped).
std::chrono::milliseconds backoff(const worker_config& o, uint32_t attempt);
void fail(worker_actor* self, caf::error err);

// worker.cpp: the training loop.
void start_step(worker_actor* self);
// worker_flow.cpp: the window, backpressure's events, workers changed at runtime.
void emit_pause(worker_actor* self, bool begins);
void on_window(worker_actor* self, uint64_t limit);
caf::result<caf::ok_atom> take_workers(worker_actor* self, const worker_schedule& workers);
// worker_client.cpp: the steps of an application's loop (worker_env::channel).
void attach_client(worker_actor* self);
void client_keys(worker_actor* self);      // the step waits for its keys
void client_gradient(worker_actor* self);  // the step waits for its gradient
void client_wake(worker_actor* self);      // the application asked something
// worker.cpp: pulls the step whose keys the core has begun (begin_pull),
// and pushes the gradient in st.grad.
void pull_step(worker_actor* self);
void push_gradient(worker_actor* self);
void send_pull(worker_actor* self, uint32_t shard, uint32_t attempt);
void send_push(worker_actor* self, uint32_t shard, const push_msg& m, uint32_t attempt);
void on_update(worker_actor* self, const supervision::directory_update& u);
void refresh(worker_actor* self, uint32_t shard);

// A request to a shard: over the data plane when it routes to the shard's
// process, else straight to the shard through CAF. The answer (or error) is
// the shard's either way. Timed by the worker's request_deadlines rather
// than CAF's clock (see actors/core/request_deadlines.hpp): a timeout reaches
// `on_error` as CAF's request_timeout all the same.
template <class Reply, class Msg, class OnReply, class OnError>
void ask_shard(worker_actor* self, uint32_t shard, const Msg& m, OnReply on_reply,
               OnError on_error) {
  auto& st = self->state;
  auto& dest = st.shards[shard];
  auto via = st.env.plane ? st.env.plane->route(dest) : caf::actor{};
  if (via)
    timed_request<Reply>(self, st.deadlines, st.cfg.request_timeout, via, std::move(on_reply),
                         std::move(on_error), dp_forward_atom::value, dest, m);
  else
    timed_request<Reply>(self, st.deadlines, st.cfg.request_timeout, dest, std::move(on_reply),
                         std::move(on_error), m);
}

// worker_scoring.cpp: a held-out slice scored with rows pulled from the
// shards over ask_shard, answered with its score or an error naming this
// worker, the slice and what failed.
caf::result<slice_score> score_slice(worker_actor* self, slice_task task);

// worker_recovery.cpp
void ask_for_rollback(worker_actor* self, const std::string& why);  // the core has halted
void replay_to(worker_actor* self, uint32_t shard, uint32_t attempt);
void ask_status(worker_actor* self, uint32_t shard, uint32_t attempt);
void resume(worker_actor* self);
// `shard`'s current incarnation has fencing epoch `epoch`: address it, fence its predecessor.
void learned_epoch(worker_actor* self, uint32_t shard, uint64_t epoch);

}  // namespace keel::worker_detail
