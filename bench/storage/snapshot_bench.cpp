// Snapshot storage throughput, each figure beside a ceiling measured in the
// same run on the same bytes:
//  - write to durability: write_snapshot_file (CRC32C of every piece, temp
//    file, fsync, rename, fsync of the directory) beside a plain sequential
//    pwrite + fsync of the same bytes;
//  - validated read: read_snapshot_file (header, length, payload CRC, schema,
//    every tensor CRC) beside a plain sequential pread of the same file, both
//    from the page cache (the file was just written) and cold (its pages
//    dropped with posix_fadvise(DONTNEED) after an fsync).
// Runs alternate keel and plain so drift hits both; the median is printed.
// Usage: snapshot_bench [MiB=256] [reps=5] [dir=$TMPDIR]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "messages/errors.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/crc32c.hpp"
#include "storage/sealed_file.hpp"
#include "storage/snapshot.hpp"

using namespace keel;
namespace fs = std::filesystem;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds(const std::function<void()>& f) {
  auto t0 = clock_type::now();
  f();
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "snapshot_bench: %s\n", what.c_str());
  std::exit(1);
}

// The snapshot's stream encoding laid out as the plain path writes it.
struct encoded_view {
  std::vector<const unsigned char*> parts;
  std::vector<size_t> sizes;
  std::vector<unsigned char> table;
  size_t total = 0;
};

encoded_view encoding_of(const frame& f) {
  encoded_view v;
  auto segs = f.segments();
  v.table.assign(((segs.size() + 2) / 2) * 8, 0);
  v.parts.push_back(v.table.data());
  v.sizes.push_back(v.table.size());
  for (auto& s : segs) {
    v.parts.push_back(reinterpret_cast<const unsigned char*>(s.begin()));
    v.sizes.push_back(s.size() * 8);
  }
  for (auto n : v.sizes)
    v.total += n;
  return v;
}

// The ceiling: the same bytes (plus a header's worth) with pwrite in the
// same 4 MiB pieces, then fsync.
void plain_write(const fs::path& p, const encoded_view& v) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    die("open " + p.string());
  uint64_t off = sealed_header_bytes;
  for (size_t i = 0; i < v.parts.size(); ++i)
    for (size_t done = 0; done < v.sizes[i];) {
      size_t piece = std::min(sealed_io_piece_bytes, v.sizes[i] - done);
      if (::pwrite(fd, v.parts[i] + done, piece, static_cast<off_t>(off)) != static_cast<ssize_t>(piece))
        die("pwrite");
      done += piece;
      off += piece;
    }
  unsigned char header[sealed_header_bytes] = {};
  if (::pwrite(fd, header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)) ||
      ::fsync(fd) != 0)
    die("pwrite/fsync");
  ::close(fd);
}

void plain_read(const fs::path& p, pooled_buffer& buf, size_t bytes) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    die("open " + p.string());
  for (size_t done = 0; done < bytes;) {
    size_t piece = std::min(sealed_io_piece_bytes, bytes - done);
    if (::pread(fd, buf.bytes() + done, piece, static_cast<off_t>(done)) != static_cast<ssize_t>(piece))
      die("pread");
    done += piece;
  }
  ::close(fd);
}

// Drops the file's pages from the page cache so the next read goes to disk.
void drop_cache(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fdatasync(fd) != 0 || ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
    die("posix_fadvise " + p.string());
  ::close(fd);
}

struct row {
  const char* name;
  std::vector<double> keel, plain;
};

void print_row(const row& r, double bytes) {
  double k = bytes / median(r.keel) / 1e9, p = bytes / median(r.plain) / 1e9;
  std::printf("%-34s %8.3f GB/s   %8.3f GB/s   %5.2fx\n", r.name, k, p, k / p);
}

// The snapshot under test: four tensors of mib/4 MiB each (a shard's
// parameters and optimizer slots), built twice so the timed second build
// reuses pooled pages.
struct bench_snapshot {
  std::vector<std::vector<float>> data;
  shard_snapshot_msg snap;
  std::vector<double> build_seconds;
};

bench_snapshot make_bench_snapshot(size_t mib) {
  bench_snapshot b;
  size_t floats = (mib << 20) / 4 / 4;
  b.data.assign(4, std::vector<float>(floats));
  std::vector<tensor_view> views;
  for (size_t t = 0; t < 4; ++t) {
    for (size_t i = 0; i < floats; ++i)
      b.data[t][i] = static_cast<float>((i * 2654435761u + t) % 1000003) * 1e-3f;
    views.push_back({"param." + std::to_string(t), schema::DType::FLOAT32, {floats / 1024, 1024},
                     b.data[t].data(), floats * 4});
  }
  snapshot_header h;
  h.checkpoint = 1;
  h.applied = {{0, 1}, {1, 1}};
  for (int r = 0; r < 2; ++r) {
    caf::expected<shard_snapshot_msg> snap = make_error(errc::invalid_argument, "unset");
    b.build_seconds.push_back(seconds([&] { snap = make_snapshot(h, views); }));
    if (!snap)
      die(describe(snap.error()));
    b.snap = std::move(*snap);
  }
  return b;
}

struct results {
  row write{"write to durability", {}, {}};
  row read_hot{"validated read, page cache", {}, {}};
  row read_cold{"validated read, cold (fadvise)", {}, {}};
};

// One repetition of every measurement; `r` alternates which side goes
// first so neither always meets a busier disk.
void run_rep(int r, const fs::path& dir, const shard_snapshot_msg& snap, const encoded_view& view,
             buffer_pool& read_pool, pooled_buffer& plain_buf, results& out) {
  auto keel_path = dir / "bench.snap";
  auto plain_path = dir / "plain.bin";
  // Both write into a new file: truncating the old one is not timed either.
  fs::remove(keel_path);
  fs::remove(plain_path);
  auto keel_write = [&] {
    auto e = write_snapshot_file(*posix_io(), dir, "bench.snap", snap, std::to_string(r));
    if (!e)
      die("write: " + describe(e.error()));
  };
  auto plain_wr = [&] { plain_write(plain_path, view); };
  auto keel_read = [&] {
    auto s = read_snapshot_file(*posix_io(), keel_path, read_pool, verify_mode::checksums);
    if (!s)
      die(describe(s.error()));
  };
  auto plain_rd = [&] { plain_read(plain_path, plain_buf, view.total + sealed_header_bytes); };
  for (int k = 0; k < 2; ++k) {
    if ((r + k) % 2 == 0)
      out.write.keel.push_back(seconds(keel_write));
    else
      out.write.plain.push_back(seconds(plain_wr));
  }
  // Page cache: the files were just written.
  out.read_hot.keel.push_back(seconds(keel_read));
  out.read_hot.plain.push_back(seconds(plain_rd));
  // Cold: each read right after its own file's pages were dropped.
  for (int k = 0; k < 2; ++k) {
    if ((r + k) % 2 == 0) {
      drop_cache(keel_path);
      out.read_cold.keel.push_back(seconds(keel_read));
    } else {
      drop_cache(plain_path);
      out.read_cold.plain.push_back(seconds(plain_rd));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  fs::path dir = argc > 3 ? fs::path(argv[3])
                          : fs::temp_directory_path() /
                              ("keel-snapshot-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto input = make_bench_snapshot(mib);
  auto view = encoding_of(*input.snap.frame());
  double file_bytes = static_cast<double>(view.total + sealed_header_bytes);
  // Both read paths get buffers whose pages are already mapped.
  auto read_pool = buffer_pool::create(size_t{2} << 30);
  auto plain_buf = read_pool->acquire(view.total / 8 + 1);
  plain_buf.zero(view.total / 8 + 1);
  {
    auto warm = read_pool->acquire(view.total / 8 + 1);
    warm.zero(view.total / 8 + 1);
  }
  results out;
  for (int r = 0; r < reps; ++r)
    run_rep(r, dir, input.snap, view, *read_pool, plain_buf, out);
  std::vector<unsigned char> probe(64 << 20, 7);
  double hw = seconds([&] { crc32c(probe.data(), probe.size()); });
  double boost = seconds([&] { crc32c_extend_reference(0, probe.data(), probe.size()); });

  std::printf("snapshot_bench: %.1f MiB file (4 tensors of %zu MiB, 4 MiB chunks), %s, median of %d\n",
              file_bytes / (1 << 20), mib / 4, dir.c_str(), reps);
  std::printf("%-34s %13s   %13s   %6s\n", "", "keel", "plain", "ratio");
  print_row(out.write, file_bytes);
  print_row(out.read_hot, file_bytes);
  print_row(out.read_cold, file_bytes);
  std::printf("build in memory (copy + tensor CRC) %8.3f GB/s   first build, pages faulted: %.3f GB/s\n",
              file_bytes / input.build_seconds[1] / 1e9, file_bytes / input.build_seconds[0] / 1e9);
  std::printf("crc32c: %.2f GB/s (%s), Boost.CRC reference %.2f GB/s\n",
              static_cast<double>(probe.size()) / hw / 1e9,
              crc32c_is_hardware_accelerated() ? "SSE4.2, 3 streams" : "Boost",
              static_cast<double>(probe.size()) / boost / 1e9);
  fs::remove_all(dir);
  return 0;
}
