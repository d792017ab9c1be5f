#pragma once
// The parameter_shard actor's state and the functions of its periodic
// checkpoints (shard_checkpoints.cpp), shared by the two files that make the
// actor (parameter_shard.cpp: the protocol). Internal to actors/ps.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "actors/core/shard_core.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/core/snapshot_chain.hpp"
#include "actors/faults/link_ends.hpp"
#include "messages/decode.hpp"
#include "messages/protocol.hpp"
#include "storage/file_io.hpp"
#include "storage/run_identity.hpp"
#include "supervision/directory.hpp"

namespace keel::shard_detail {

struct pending_pull {
  uint64_t clock;
  decoded<schema::PullRequest> request;
  reply_to<pull_reply_msg> to;
};

struct last_reply {
  std::optional<pull_reply_msg> reply;
  uint64_t clock = 0;
  uint64_t version = 0;
  std::vector<uint64_t> dense;  // begin, end of each range
  std::vector<uint64_t> sparse_keys;

  bool answers(schema::PullRequest::Reader req, uint64_t shard_version) const {
    if (!reply || clock != req.getClock() || version != shard_version)
      return false;
    auto ranges = req.getDense();
    auto keys = req.getSparseKeys();
    if (ranges.size() * 2 != dense.size() || keys.size() != sparse_keys.size())
      return false;
    for (unsigned i = 0; i < ranges.size(); ++i)
      if (ranges[i].getBegin() != dense[2 * i] || ranges[i].getEnd() != dense[2 * i + 1])
        return false;
    for (unsigned i = 0; i < keys.size(); ++i)
      if (keys[i] != sparse_keys[i])
        return false;
    return true;
  }

  void remember(schema::PullRequest::Reader req, uint64_t shard_version, pull_reply_msg r) {
    clock = req.getClock();
    version = shard_version;
    dense.clear();
    for (auto range : req.getDense()) {
      dense.push_back(range.getBegin());
      dense.push_back(range.getEnd());
    }
    sparse_keys.clear();
    for (auto k : req.getSparseKeys())
      sparse_keys.push_back(k);
    reply = std::move(r);
  }
};

// A failed write of checkpoint `id` (at `step`), and why.
struct write_failure {
  uint64_t id = 0;
  uint64_t step = 0;
  std::string why;
};

struct shard_state {
  shard_core core;
  last_reply replied;
  std::deque<pending_pull> pulls;  // waiting for the consistency rule
  uint64_t snapshot_every = 0;
  uint64_t last_snapshot_id = 0;  // the restored or last taken checkpoint id
  caf::actor checkpointer;        // its current incarnation (invalid while none is up)
  // Write failures while no checkpointer was up (not yet heard of, or
  // restarting): it hears them, in order, once one is (on_checkpointer).
  // The newest max_unreported are kept.
  std::deque<write_failure> unreported;
  static constexpr size_t max_unreported = 256;
  caf::actor writer;              // its snapshot_writer (with snapshot_every)
  caf::actor peer_replica;        // where each written file's frame goes (may be invalid)
  // The newest periodic snapshot taken and not yet written (let go once its
  // file is durable), and the part of the newest one written.
  std::optional<shard_snapshot_msg> newest;
  uint64_t newest_id = 0, newest_step = 0;
  uint64_t newest_tag = 0;  // its file's name tag (a write again reuses it: snapshot_writer.hpp)
  snapshot_chain chain;     // bases and deltas: which the next snapshot is
  std::optional<checkpoint_manifest_msg> written;
  uint64_t written_id = 0;
  uint32_t write_failures = 0;  // in a row, for the backoff
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5000};
  std::mt19937_64 tags{std::random_device{}()};  // file name tags (snapshot_writer.hpp)
  // Where the periodic snapshots' memory comes from and returns to, so each
  // reuses the pages of one superseded before it (no fresh page faults).
  std::shared_ptr<buffer_pool> snapshot_memory = snapshot_pool();
  // Where its files go, and from which size a snapshot is streamed into its
  // file (shard_stream.hpp) instead of built in memory (UINT64_MAX: never).
  std::shared_ptr<file_io> io;
  std::string checkpoint_dir;
  uint64_t stream_above = UINT64_MAX;
  // A streamed snapshot whose write failed: its checkpoint and the shard's
  // state stamp then (shard_checkpoints.cpp). Streamed again (as a base) after the backoff if the shard
  // has not changed since (its workers paused at that checkpoint step).
  std::optional<std::pair<uint64_t, uint64_t>> restream;
  link_ends links;  // to the workers and the checkpointer, where link faults act
  uint64_t epoch = 0;  // this incarnation's fencing epoch (0: unfenced)
  run_identity run;    // stamped on every snapshot (only the id and the hash)
};

inline int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}
using shard_actor = caf::stateful_actor<shard_state>;

// Takes a snapshot when the progress clock enters a new multiple of
// snapshot_every, and writes it (shard_checkpoints.cpp).
void maybe_snapshot(shard_actor* self);
// The backoff after a failed write of checkpoint `id` has passed.
void write_again(shard_actor* self, uint64_t id);
// The checkpointer's name changed hands.
void on_checkpointer(shard_actor* self, const supervision::directory_update& u);

}  // namespace keel::shard_detail
