#include "storage/async_snapshot_store.hpp"

namespace keel {

async_snapshot_store::async_snapshot_store(std::shared_ptr<snapshot_store> store, size_t threads)
  : store_(std::move(store)), exec_(threads) {}

std::future<caf::expected<manifest_entry>> async_snapshot_store::write_snapshot(
  shard_snapshot_msg snapshot) {
  return exec_.submit([s = store_, snapshot = std::move(snapshot)] { return s->write_snapshot(snapshot); });
}

void async_snapshot_store::write_snapshot(shard_snapshot_msg snapshot,
                                          callback<manifest_entry> done) {
  post([s = store_, snapshot = std::move(snapshot)] { return s->write_snapshot(snapshot); },
       std::move(done));
}

std::future<caf::expected<commit_result>> async_snapshot_store::commit(checkpoint_manifest m) {
  return exec_.submit([s = store_, m = std::move(m)] { return s->commit(m); });
}

void async_snapshot_store::commit(checkpoint_manifest m, callback<commit_result> done) {
  post([s = store_, m = std::move(m)] { return s->commit(m); }, std::move(done));
}

std::future<caf::expected<latest_checkpoint>> async_snapshot_store::latest_valid() {
  return exec_.submit([s = store_] { return s->latest_valid(); });
}

void async_snapshot_store::latest_valid(callback<latest_checkpoint> done) {
  post([s = store_] { return s->latest_valid(); }, std::move(done));
}

std::future<caf::expected<stored_snapshot>> async_snapshot_store::read_snapshot(uint64_t checkpoint,
                                                                                uint32_t shard) {
  return exec_.submit([s = store_, checkpoint, shard] { return s->read_snapshot(checkpoint, shard); });
}

void async_snapshot_store::read_snapshot(uint64_t checkpoint, uint32_t shard,
                                         callback<stored_snapshot> done) {
  post([s = store_, checkpoint, shard] { return s->read_snapshot(checkpoint, shard); },
       std::move(done));
}

}  // namespace keel
