#include "actors/ps/snapshot_writer.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>

#include <caf/all.hpp>

#include "actors/core/atoms.hpp"
#include "actors/core/thread_clock.hpp"
#include "messages/errors.hpp"
#include "storage/store_layout.hpp"

namespace keel {

namespace {

// Temporary names unique in this process (and, with the pid, on this host).
std::string next_tmp_tag() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(::getpid()) + "-w" + std::to_string(++counter);
}

// What `write` returns, with the wall and CPU time (of this thread) it took.
template <class Write>
caf::result<manifest_entry> timed(Write write) {
  auto t0 = std::chrono::steady_clock::now();
  auto cpu0 = thread_cpu_us();
  caf::expected<manifest_entry> entry = write();
  if (!entry)
    return std::move(entry.error());
  entry->write_cpu_us = static_cast<uint64_t>(thread_cpu_us() - cpu0);
  entry->write_us = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
  return *entry;
}

caf::result<manifest_entry> write_one(file_io& io, const std::string& dir, const shard_snapshot_msg& snap,
                                      uint64_t tag) {
  return timed([&] {
    return write_snapshot_file(io, dir, snap, next_tmp_tag(),
                               [&](schema::ShardSnapshot::Reader s) -> caf::expected<std::string> {
                                 return snapshot_name(s.getCheckpoint(), s.getShard(), tag);
                               });
  });
}

caf::result<manifest_entry> seal_one(file_io& io, const std::shared_ptr<streamed_snapshot>& s) {
  if (!s || !s->file)
    return make_error(errc::invalid_argument, "sealing a streamed snapshot: it holds no file");
  return timed([&] { return commit_streamed(io, std::move(*s)); });
}

}  // namespace

caf::actor spawn_snapshot_writer(caf::actor_system& sys, std::string dir, std::shared_ptr<file_io> io) {
  if (!io)
    io = posix_io();
  return sys.spawn<caf::detached>([dir = std::move(dir), io](caf::event_based_actor*) -> caf::behavior {
    return {
      [dir, io](write_atom, const shard_snapshot_msg& snap, uint64_t tag) {
        return write_one(*io, dir, snap, tag);
      },
      [io](seal_atom, const std::shared_ptr<streamed_snapshot>& s) { return seal_one(*io, s); },
    };
  });
}

}  // namespace keel
