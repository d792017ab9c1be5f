// Push throughput, each figure beside a ceiling measured in the same run:
//  - local: building a push by copying a gradient into it, as a worker
//    does, beside a memcpy of the same bytes (issue 11's P2 "build");
//  - local: build + send + decode (validated) between two actors in one
//    process, beside a memcpy of the same bytes; the push built either by
//    copying the gradient in or by writing it into a pooled buffer that
//    the push adopts (one pass over the bytes either way, as the memcpy);
//  - remote: the same across two processes on loopback through CAF's
//    middleman, beside a raw TCP transfer of the same bytes.
// Usage: push_bench [pushes_per_size]   (default 64)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <caf/all.hpp>

#include "messages/decode.hpp"
#include "messages/register_types.hpp"
#include "push_bench.hpp"

using namespace keel;
using namespace keel::bench;

namespace {

// The fastest of five passes of `reps` copies: one pass is short enough
// (16 MiB for 16 pushes of 1 MiB) that a single preemption by another
// process can halve it, and a ceiling should be what the machine can do.
double memcpy_gbps(size_t bytes, size_t reps) {
  std::vector<char> src(bytes, 1);
  auto dst = buffer_pool::process_default()->acquire(bytes / 8 + 1);
  std::memcpy(dst.bytes(), src.data(), bytes);  // fault the pages in first
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < reps; ++i) {
      src[i % bytes] = static_cast<char>(i);
      std::memcpy(dst.bytes(), src.data(), bytes);
    }
    best = std::max(best, static_cast<double>(bytes * reps) / seconds_since(t0) / 1e9);
  }
  volatile char keep = dst.bytes()[reps % bytes];
  (void)keep;
  return best;
}

// Builds `reps` pushes of `floats` values one after another (each freed
// before the next, so its buffers return to the pool, as a worker's do
// once the log lets go of them).
double build_gbps(size_t floats, size_t reps) {
  std::vector<float> grad(floats, 0.5f);
  size_t bytes = 0;
  for (size_t i = 0; i < 2; ++i)  // warm the pool
    bytes += make_push(grad, i + 1).frame()->size_words();
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < reps; ++i) {
    grad[i % floats] = static_cast<float>(i);
    bytes += make_push(grad, i + 1).frame()->size_words();
  }
  double s = seconds_since(t0);
  if (bytes == 0)
    std::abort();
  return static_cast<double>(floats * 4 * reps) / s / 1e9;
}

double local_gbps(caf::actor_system& sys, size_t floats, size_t pushes, bool adopt,
                  bool check_finite = true) {
  decode_limits limits;
  limits.require_finite = check_finite;
  auto s = sys.spawn(sink, limits);
  caf::scoped_actor self{sys};
  std::vector<float> grad(floats, 0.5f);
  constexpr size_t window = 4;
  size_t sent = 0, done = 0;
  auto& pool = buffer_pool::process_default();
  auto send_one = [&] {
    if (adopt) {
      // The gradient written into a pooled buffer (whose pages the pool
      // keeps mapped), then adopted by the push: the same one pass over the
      // bytes as a copy-build and as the memcpy ceiling.
      auto buf = pool->acquire(floats / 2 + 1);
      std::memcpy(buf.bytes(), grad.data(), floats * 4);
      self->send(s, adopt_push(std::move(buf), floats, ++sent));
    } else {
      self->send(s, make_push(grad, ++sent));
    }
  };
  for (size_t i = 0; i < 2; ++i) {  // warm the pool
    send_one();
    self->receive([](double) {});
  }
  sent = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (sent < pushes && sent < window)
    send_one();
  while (done < pushes) {
    self->receive([&](double) { ++done; });
    if (sent < pushes)
      send_one();
  }
  double secs = seconds_since(t0);
  self->send_exit(s, caf::exit_reason::user_shutdown);
  return static_cast<double>(floats * 4 * pushes) / secs / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  size_t pushes = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  if (pushes == 0) {
    std::fprintf(stderr, "push_bench: pushes_per_size must be a positive number\n");
    return 2;
  }
  const size_t sizes_mib[] = {1, 16};
  remote_figures remote[2];
  // The remote part forks, so it runs before this process starts any threads.
  for (int i = 0; i < 2; ++i)
    remote[i] = run_remote(sizes_mib[i] * (1 << 20) / 4, pushes);

  caf::actor_system_config cfg;
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  std::printf("%-8s %-44s %10s %12s %7s\n", "payload", "measurement", "GB/s", "ceiling GB/s", "ratio");
  for (int i = 0; i < 2; ++i) {
    size_t floats = sizes_mib[i] * (1 << 20) / 4;
    std::string size = std::to_string(sizes_mib[i]) + " MiB";
    // Each row's memcpy is measured right before it, so that load from
    // elsewhere on the machine hits a figure and its ceiling alike.
    auto row = [&](const char* what, auto measure) {
      double mc = memcpy_gbps(floats * 4, pushes);
      double keel = measure();
      std::printf("%-8s %-44s %10.2f %12.2f %7.2f\n", size.c_str(), what, keel, mc, keel / mc);
    };
    row("local: build (copy the gradient in) vs memcpy",
        [&] { return build_gbps(floats, pushes); });
    row("local: write+adopt+send+decode vs memcpy",
        [&] { return local_gbps(sys, floats, pushes, true); });
    row("local: copy-build+send+decode vs memcpy",
        [&] { return local_gbps(sys, floats, pushes, false); });
    row("local: write+adopt+send+decode, no NaN scan",
        [&] { return local_gbps(sys, floats, pushes, true, false); });
    std::printf("%-8s %-44s %10.2f %12.2f %7.2f\n", size.c_str(),
                "remote: middleman push+ack vs raw TCP", remote[i].keel_gbps, remote[i].tcp_gbps,
                remote[i].keel_gbps / remote[i].tcp_gbps);
  }
  return 0;
}
