#pragma once
// Shared by the storage tests: a unique temporary directory removed at the
// end of the test, and small deterministic snapshots and checkpoints.

#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <doctest/doctest.h>

#include "messages/errors.hpp"
#include "storage/snapshot.hpp"
#include "storage/snapshot_store.hpp"

namespace keel::test {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with its contents.
class temp_dir {
 public:
  temp_dir() {
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("keel-storage-test-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter++) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Deterministic float contents that differ per (checkpoint, shard, tensor).
inline std::vector<float> pattern(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i * 2654435761u + seed * 40503u) % 100000) * 0.001f - 7.0f;
  return v;
}

// The tensors of a test shard: "w" [rows, 32] float32 and "b" [32] float32.
struct shard_state {
  std::vector<float> w;
  std::vector<float> b;
  size_t rows;
};

inline shard_state sample_state(uint64_t checkpoint, uint32_t shard, size_t rows = 64) {
  return {pattern(rows * 32, checkpoint * 131 + shard), pattern(32, checkpoint * 7 + shard + 1),
          rows};
}

// A snapshot's place in a chain (snapshot_header's fields): a base by default.
struct chain_place {
  std::string parent_file;
  uint64_t parent_checkpoint = 0;
  uint64_t base_checkpoint = 0;
};

// A snapshot of `shard` in `checkpoint`, tensors split into chunks of
// `chunk_bytes` (small by default so every test crosses chunk boundaries).
inline shard_snapshot_msg sample_snapshot(uint64_t checkpoint, uint32_t shard, size_t rows = 64,
                                          size_t chunk_bytes = 1000, const chain_place& place = {}) {
  auto s = sample_state(checkpoint, shard, rows);
  snapshot_header h;
  h.parent_file = place.parent_file;
  h.parent_checkpoint = place.parent_checkpoint;
  h.base_checkpoint = place.base_checkpoint;
  h.shard = shard;
  h.checkpoint = checkpoint;
  h.step = checkpoint * 10;
  h.shard_version = checkpoint * 100 + shard;
  h.applied = {{2, checkpoint * 3}, {0, checkpoint * 3 + 1}, {1, checkpoint * 3 + 2}};
  h.created_unix_ms = 1700000000000 + static_cast<int64_t>(checkpoint);
  std::string opt = "adam beta1=0.9 shard " + std::to_string(shard);
  auto snap = make_snapshot(h,
                            {{"w", schema::DType::FLOAT32, {rows, 32}, s.w.data(), s.w.size() * 4},
                             {"b", schema::DType::FLOAT32, {32}, s.b.data(), s.b.size() * 4}},
                            {{"optimizer", opt.data(), opt.size()}}, chunk_bytes);
  REQUIRE_MESSAGE(snap, describe(snap.error()));
  return std::move(*snap);
}

inline std::vector<shard_snapshot_msg> sample_checkpoint(uint64_t checkpoint, uint32_t shards = 2,
                                                         size_t rows = 64) {
  std::vector<shard_snapshot_msg> out;
  for (uint32_t s = 0; s < shards; ++s)
    out.push_back(sample_snapshot(checkpoint, s, rows));
  return out;
}

// Writes checkpoint `id` of `shards` shards and requires success.
inline void commit_sample(snapshot_store& store, uint64_t id, uint32_t shards = 2) {
  auto r = store.write_checkpoint(id, id * 10, 1700000000000 + static_cast<int64_t>(id),
                                  sample_checkpoint(id, shards));
  REQUIRE_MESSAGE(r, describe(r.error()));
}

// Commits checkpoints whose shards' files form chains, as shards writing
// incremental checkpoints do: `commit(id, true)` starts a new chain with a
// base per shard, `commit(id, false)` adds to every shard's chain a delta
// (a sample snapshot whose header names its parent and base) and commits
// it with the chain it applies on.
struct chain_writer {
  explicit chain_writer(snapshot_store& s, uint32_t n = 2, std::map<uint32_t, std::vector<chain_link>> c = {})
    : store(s), shards(n), chains(std::move(c)) {}

  snapshot_store& store;
  uint32_t shards;
  std::map<uint32_t, std::vector<chain_link>> chains;  // per shard, newest file last

  // The snapshot shard `shard` would write as checkpoint `id`.
  shard_snapshot_msg snapshot(uint64_t id, uint32_t shard, bool base) {
    auto& c = chains[shard];
    chain_place place;
    if (!base) {
      REQUIRE(!c.empty());
      place = {c.back().file, c.back().checkpoint, c.front().checkpoint};
    }
    return sample_snapshot(id, shard, 64, 1000, place);
  }

  // The entry of `file` in checkpoint `id`'s manifest, with its chain.
  manifest_entry entry(const manifest_entry& written, bool base) {
    auto e = written;
    if (!base)
      e.chain = chains[e.shard];
    return e;
  }

  void committed(const checkpoint_manifest& m) {
    for (auto& e : m.shards) {
      auto& c = chains[e.shard];
      if (e.chain.empty())
        c.clear();
      c.push_back({m.checkpoint, e.file, e.bytes, e.crc32c});
    }
  }

  caf::expected<commit_result> try_commit(uint64_t id, bool base) {
    checkpoint_manifest m{id, id * 10, 1700000000000 + static_cast<int64_t>(id), {}, {}};
    for (uint32_t s = 0; s < shards; ++s) {
      auto written = store.write_snapshot(snapshot(id, s, base));
      REQUIRE_MESSAGE(written, describe(written.error()));
      m.shards.push_back(entry(*written, base));
    }
    auto r = store.commit(m);
    if (r)
      committed(m);
    return r;
  }

  commit_result commit(uint64_t id, bool base) {
    auto r = try_commit(id, base);
    REQUIRE_MESSAGE(r, describe(r.error()));
    return *r;
  }
};

// Checks that `snap` holds exactly what sample_snapshot(checkpoint, shard) put in.
inline void check_sample(const stored_snapshot& snap, uint64_t checkpoint, uint32_t shard,
                         size_t rows = 64) {
  auto r = snap.root();
  CHECK(r.getCheckpoint() == checkpoint);
  CHECK(r.getShard() == shard);
  CHECK(r.getStep() == checkpoint * 10);
  CHECK(r.getShardVersion() == checkpoint * 100 + shard);
  REQUIRE(r.getApplied().size() == 3);
  CHECK(r.getApplied()[0].getWorker() == 0);
  CHECK(r.getApplied()[2].getSeq() == checkpoint * 3);
  auto expect = sample_state(checkpoint, shard, rows);
  REQUIRE(r.getTensors().size() == 2);
  std::vector<float> w(rows * 32);
  REQUIRE(!copy_tensor(r.getTensors()[0], w.data(), w.size() * 4));
  CHECK(w == expect.w);
  std::vector<float> b(32);
  REQUIRE(!copy_tensor(r.getTensors()[1], b.data(), b.size() * 4));
  CHECK(b == expect.b);
  REQUIRE(r.getSections().size() == 1);
  CHECK(std::string(reinterpret_cast<const char*>(r.getSections()[0].getData().begin()),
                    r.getSections()[0].getData().size()) ==
        "adam beta1=0.9 shard " + std::to_string(shard));
}

// The names of the files in `dir`, sorted.
inline std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace keel::test
