#pragma once
// An async_snapshot_store runs a snapshot_store's blocking calls on its own
// io_executor and hands each result back either as a std::future or to a
// completion callback, which runs on an executor thread (an actor wraps it
// by sending itself a message from the callback). Snapshots travel as shared
// frames, never copied. Errors are the same values the snapshot_store
// returns. Thread-safe; the destructor waits for every queued call and
// callback to finish.

#include <functional>
#include <future>
#include <memory>

#include "storage/io_executor.hpp"
#include "storage/snapshot_store.hpp"

namespace keel {

class async_snapshot_store {
 public:
  template <class T>
  using callback = std::function<void(caf::expected<T>)>;

  // Serves `store` with `threads` I/O threads (two let one shard's snapshot
  // be written while another's is checksummed).
  explicit async_snapshot_store(std::shared_ptr<snapshot_store> store, size_t threads = 2);

  snapshot_store& store() { return *store_; }

  std::future<caf::expected<manifest_entry>> write_snapshot(shard_snapshot_msg snapshot);
  void write_snapshot(shard_snapshot_msg snapshot, callback<manifest_entry> done);

  std::future<caf::expected<commit_result>> commit(checkpoint_manifest m);
  void commit(checkpoint_manifest m, callback<commit_result> done);

  std::future<caf::expected<latest_checkpoint>> latest_valid();
  void latest_valid(callback<latest_checkpoint> done);

  std::future<caf::expected<stored_snapshot>> read_snapshot(uint64_t checkpoint, uint32_t shard);
  void read_snapshot(uint64_t checkpoint, uint32_t shard, callback<stored_snapshot> done);

 private:
  template <class F, class T>
  void post(F f, callback<T> done) {
    exec_.post([f = std::move(f), done = std::move(done)]() mutable { done(f()); });
  }

  std::shared_ptr<snapshot_store> store_;
  io_executor exec_;  // declared last: joined before store_ is released
};

}  // namespace keel
