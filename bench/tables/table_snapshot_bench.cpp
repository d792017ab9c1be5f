// The cost of putting an embedding table into a shard snapshot (issue 26:
// checkpoints of tables): the table encoded straight into the snapshot
// message's chunks, from a pool that gives back the memory of the snapshot
// before (what a shard does, actors/core/shard_snapshot.hpp), beside, in the
// same run,
//  - the ceiling: a memcpy of as many bytes into a warm buffer (the table's
//    rows are one read and one write of that size at the least);
//  - the former path: the table encoded into a vector of its own, then
//    copied into a message in fresh memory (every page faulted in anew).
// Also the encoder alone into a warm buffer (the rows block by block, as the table holds them: format version 3), and the
// content hash (the read-out's, also in key order). The table: d = 16 with
// AdaGrad state, rows keyed by hashed IDs. Each figure is the median of
// `reps`, in GB/s of encoded bytes. Checks that both paths give the same
// table bytes and CRC.
// Usage: table_snapshot_bench [rows=1000000] [reps=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "actors/core/table_snapshot.hpp"
#include "messages/decode.hpp"
#include "storage/crc32c.hpp"
#include "storage/snapshot.hpp"

using namespace keel;
using steady = std::chrono::steady_clock;

namespace {

constexpr uint32_t dim = 16;

double median_seconds(size_t reps, const std::function<void()>& f) {
  std::vector<double> s;
  for (size_t i = 0; i < reps; ++i) {
    auto t0 = steady::now();
    f();
    s.push_back(std::chrono::duration<double>(steady::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

embedding_table make_table(size_t rows) {
  table_config c;
  c.name = "ctr.c1";
  c.dim = dim;
  c.optimizer.kind = optimizer_kind::adagrad;
  auto t = embedding_table::make(c, [](uint64_t key, float* out, uint32_t d) {
    for (uint32_t i = 0; i < d; ++i) out[i] = static_cast<float>(mix64(key + i) >> 40) * 1e-9f;
  });
  if (!t) {
    std::fprintf(stderr, "table_snapshot_bench: %s\n", describe(t.error()).c_str());
    std::exit(1);
  }
  constexpr size_t per_push = 4096;
  std::vector<uint64_t> keys(per_push);
  std::vector<float> grads(per_push * dim, 0.01f);
  for (size_t done = 0, step = 1; done < rows; done += per_push, ++step) {
    size_t n = std::min(per_push, rows - done);
    for (size_t i = 0; i < n; ++i) keys[i] = mix64(done + i);
    if (auto err = t->apply(keys.data(), n, grads.data(), n * dim, step)) {
      std::fprintf(stderr, "table_snapshot_bench: %s\n", describe(err).c_str());
      std::exit(1);
    }
  }
  return std::move(*t);
}

// The table's tensor bytes and CRC in a snapshot.
std::pair<std::vector<unsigned char>, uint32_t> table_tensor(const shard_snapshot_msg& m) {
  auto d = decode(m);
  auto t = d->root().getTensors()[0];
  std::vector<unsigned char> out(tensor_bytes(t));
  copy_tensor(t, out.data(), out.size());
  return {std::move(out), t.getCrc32c()};
}

}  // namespace

int main(int argc, char** argv) {
  const size_t rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const size_t reps = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 5;
  if (rows == 0 || reps == 0) {
    std::fprintf(stderr, "usage: table_snapshot_bench [rows > 0] [reps > 0]\n");
    return 2;
  }
  const embedding_table table = make_table(rows);
  const size_t bytes = encoded_table_bytes(table);
  const double gb = static_cast<double>(bytes) / 1e9;
  snapshot_header h;
  h.checkpoint = 1;

  std::vector<unsigned char> src(bytes, 1), dst(bytes, 2);
  double ceiling = median_seconds(reps, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  double encoder = median_seconds(reps, [&] { encode_table_into(table, {{dst.data(), bytes}}); });

  // The shard's path: a pool of its own, the previous snapshot let go first.
  auto pool = buffer_pool::create(SIZE_MAX, 1);
  std::vector<tensor_writer> written = {
    {"table.ctr.c1", schema::DType::UINT8, {bytes}, bytes,
     [&](span_source& chunks) { return encode_table_into(table, chunks); }}};
  shard_snapshot_msg direct;
  double into_message = median_seconds(reps, [&] {
    direct = shard_snapshot_msg();
    direct = *make_snapshot(h, {}, written, default_chunk_bytes, pool);
  });

  // The former path: a vector, then a copy into a message in fresh memory.
  shard_snapshot_msg copied;
  double former = median_seconds(reps, [&] {
    copied = shard_snapshot_msg();
    auto fresh = buffer_pool::create(0);
    auto b = encode_table(table);
    copied = *make_snapshot(h, {{"table.ctr.c1", schema::DType::UINT8, {b.size()}, b.data(), b.size()}},
                            std::vector<section_view>{}, default_chunk_bytes, fresh);
  });
  double hash = median_seconds(reps, [&] { content_sha256(table); });

  if (table_tensor(direct) != table_tensor(copied)) {
    std::fprintf(stderr, "table_snapshot_bench: the two paths stored different table bytes\n");
    return 1;
  }
  std::printf("table of %zu rows, d = %u, AdaGrad: %.1f MB encoded, median of %zu\n", rows, dim,
              gb * 1e3, reps);
  std::printf("%-58s %8s %8s\n", "", "GB/s", "ceiling");
  auto row = [&](const char* what, double s) {
    std::printf("%-58s %8.2f %8.2f\n", what, gb / s, ceiling / s);
  };
  row("memcpy of the same bytes, warm buffers (ceiling)", ceiling);
  row("encode_table_into a warm buffer (rows + CRC)", encoder);
  row("snapshot: encoded into the message, memory reused", into_message);
  row("snapshot, former: vector, then copied into fresh memory", former);
  row("content_sha256 (the read-out's hash, key order)", hash);
  std::printf("speed-up of the snapshot over the former path: %.2fx\n", former / into_message);
  return 0;
}
