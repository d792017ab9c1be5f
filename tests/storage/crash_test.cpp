// A writer process killed with SIGKILL at random points while it writes
// checkpoints. The child reports each file operation and each committed
// checkpoint through a pipe; the parent kills it after a seeded random
// number of operations (plus a random spin, so the kill also lands between
// operations), waits for it with waitpid, and reopens the store. Invariant:
// the store reopens clean (no temporary or uncommitted files), holds at most
// K checkpoints, none damaged, and its latest valid checkpoint is the last
// one the child reported committed or the one it was committing.
#include <cstring>
#include <random>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "storage/store_layout.hpp"
#include "storage_fixtures.hpp"

using namespace keel;
using namespace keel::test;

namespace {

constexpr size_t keep_last = 2;

void send(int fd, const void* data, size_t n) {
  while (::write(fd, data, n) < 0 && errno == EINTR) {
  }
}

void report_op(int fd) {
  char c = 'o';
  send(fd, &c, 1);
}

// A writable_file that reports each write and fsync before doing it.
class reporting_file final : public writable_file {
 public:
  reporting_file(std::unique_ptr<writable_file> inner, int fd) : inner_(std::move(inner)), fd_(fd) {}
  caf::error write_at(uint64_t offset, const void* data, size_t n) override {
    report_op(fd_);
    return inner_->write_at(offset, data, n);
  }
  caf::error sync() override {
    report_op(fd_);
    return inner_->sync();
  }
  const fs::path& path() const override { return inner_->path(); }

 private:
  std::unique_ptr<writable_file> inner_;
  int fd_;
};

// posix_io, reporting every operation that changes the directory.
class reporting_io final : public file_io {
 public:
  explicit reporting_io(int fd) : fd_(fd) {}
  caf::expected<std::unique_ptr<writable_file>> create(const fs::path& p) override {
    report_op(fd_);
    auto f = posix_io()->create(p);
    if (!f)
      return std::move(f.error());
    return std::unique_ptr<writable_file>(new reporting_file(std::move(*f), fd_));
  }
  caf::expected<std::unique_ptr<readable_file>> open(const fs::path& p) override {
    return posix_io()->open(p);
  }
  caf::error rename(const fs::path& from, const fs::path& to) override {
    report_op(fd_);
    return posix_io()->rename(from, to);
  }
  caf::error remove(const fs::path& p) override {
    report_op(fd_);
    return posix_io()->remove(p);
  }
  caf::error sync_dir(const fs::path& dir) override {
    report_op(fd_);
    return posix_io()->sync_dir(dir);
  }
  caf::error create_dirs(const fs::path& dir) override { return posix_io()->create_dirs(dir); }
  caf::expected<std::vector<std::string>> list(const fs::path& dir) override {
    return posix_io()->list(dir);
  }

 private:
  int fd_;
};

// The child: commits checkpoints 1, 2, ... until killed, reporting each.
[[noreturn]] void write_until_killed(const fs::path& dir, int fd) {
  store_options opts;
  opts.keep_last = keep_last;
  opts.io = std::make_shared<reporting_io>(fd);
  auto store = snapshot_store::open(dir, opts);
  if (!store)
    ::_exit(3);
  for (uint64_t id = 1; id <= 10000; ++id) {
    std::vector<shard_snapshot_msg> snaps;
    for (uint32_t s = 0; s < 2; ++s)
      snaps.push_back(sample_snapshot(id, s, 512, 16384));
    if (!(*store)->write_checkpoint(id, id * 10, 0, snaps))
      ::_exit(4);
    char rec[9] = {'c'};
    std::memcpy(rec + 1, &id, 8);
    send(fd, rec, sizeof(rec));
  }
  ::_exit(0);
}

struct kill_outcome {
  uint64_t last_reported = 0;
  int status = 0;
};

// Reads the child's reports, kills it after `kill_after` operations and a
// spin of `spin` iterations, then drains the pipe and reaps the child.
kill_outcome kill_child(pid_t pid, int fd, uint64_t kill_after, uint64_t spin) {
  kill_outcome out;
  uint64_t ops = 0;
  bool killed = false;
  char c;
  while (::read(fd, &c, 1) == 1) {
    if (c == 'c') {
      uint64_t id = 0;
      size_t got = 0;
      while (got < 8) {
        auto n = ::read(fd, reinterpret_cast<char*>(&id) + got, 8 - got);
        if (n <= 0)
          break;
        got += static_cast<size_t>(n);
      }
      if (got == 8)
        out.last_reported = id;
    } else if (++ops == kill_after && !killed) {
      volatile uint64_t sink = 0;
      for (uint64_t i = 0; i < spin; ++i)
        sink = sink + i;
      ::kill(pid, SIGKILL);
      killed = true;
    }
  }
  ::waitpid(pid, &out.status, 0);
  return out;
}

// Returns the id of the latest valid checkpoint after reopening (0: none).
uint64_t check_reopened(const fs::path& dir, uint64_t last_reported) {
  store_options opts;
  opts.keep_last = keep_last;
  auto store = snapshot_store::open(dir, opts);
  REQUIRE_MESSAGE(store, describe(store.error()));
  auto ids = (*store)->committed();
  REQUIRE(ids);
  CHECK(ids->size() <= keep_last);
  for (auto& name : files_in(dir)) {
    auto f = parse_store_file_name(name);
    REQUIRE_MESSAGE(f, name);
    CHECK_MESSAGE(f->kind != store_file_kind::temporary, name);
    CHECK_MESSAGE(std::count(ids->begin(), ids->end(), f->checkpoint) == 1, name);
  }
  auto latest = (*store)->latest_valid();
  uint64_t found = latest ? latest->checkpoint.manifest.checkpoint : 0;
  if (last_reported == 0 && !latest) {
    CHECK(is(latest.error(), errc::not_found));
    CHECK(ids->empty());
  } else {
    REQUIRE_MESSAGE(latest, describe(latest.error()));
    auto id = latest->checkpoint.manifest.checkpoint;
    CHECK((id == last_reported || id == last_reported + 1));
    CHECK(latest->skipped.empty());
    check_sample(*latest->checkpoint.shard(1), id, 1, 512);
  }
  for (auto id : *ids) {
    auto c = (*store)->load(id);
    CHECK_MESSAGE(c, describe(c.error()));
  }
  uint64_t next = ids->empty() ? 1 : ids->back() + 1;
  commit_sample(**store, next);
  return found;
}

}  // namespace

TEST_CASE("a writer killed by SIGKILL at random points leaves a store that reopens clean with its last committed checkpoint") {
  const uint64_t seed = 20240917;
  std::mt19937_64 rng(seed);
  std::string outcomes;  // per round: last reported commit -> latest valid on reopen
  for (int round = 0; round < 24; ++round) {
    auto kill_after = std::uniform_int_distribution<uint64_t>(1, 90)(rng);
    auto spin = std::uniform_int_distribution<uint64_t>(0, 200000)(rng);
    CAPTURE(round);
    CAPTURE(kill_after);
    CAPTURE(spin);
    temp_dir dir;
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    auto pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      write_until_killed(dir.path(), fds[1]);
    }
    ::close(fds[1]);
    auto out = kill_child(pid, fds[0], kill_after, spin);
    ::close(fds[0]);
    REQUIRE(WIFSIGNALED(out.status));
    CHECK(WTERMSIG(out.status) == SIGKILL);
    CAPTURE(out.last_reported);
    auto found = check_reopened(dir.path(), out.last_reported);
    outcomes += " " + std::to_string(out.last_reported) + "->" + std::to_string(found);
  }
  MESSAGE("schedule seed " << seed << "; reported->reopened:" << outcomes);
}
