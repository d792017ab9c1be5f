#include "actors/core/tensor_recycler.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>

namespace keel::tensor_recycler {

namespace {

constexpr size_t min_bytes = size_t{1} << 20;
constexpr size_t max_kept = 16;

struct cache {
  std::mutex mtx;
  std::vector<std::vector<float>> kept;
  size_t bytes = 0;
};

cache& the_cache() {
  static cache c;
  return c;
}

size_t bytes_of(const std::vector<float>& v) {
  return v.capacity() * sizeof(float);
}

// Transparent huge pages for a large fresh array: a tenth of the page
// faults' cost. Advice only; a kernel that refuses it changes nothing.
void prefer_huge_pages([[maybe_unused]] void* p, [[maybe_unused]] size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t huge = uintptr_t{2} << 20;
  if (bytes < 2 * huge)
    return;
  auto begin = (reinterpret_cast<uintptr_t>(p) + huge - 1) & ~(huge - 1);
  auto end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(huge - 1);
  if (end > begin)
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
}

}  // namespace

std::vector<float> take(size_t n) {
  if (n * sizeof(float) >= min_bytes) {
    auto& c = the_cache();
    std::lock_guard<std::mutex> guard(c.mtx);
    size_t best = c.kept.size();
    for (size_t i = 0; i < c.kept.size(); ++i) {
      auto cap = c.kept[i].capacity();
      if (cap >= n && cap / 2 <= n && (best == c.kept.size() || cap < c.kept[best].capacity()))
        best = i;
    }
    if (best < c.kept.size()) {
      std::vector<float> out = std::move(c.kept[best]);
      c.kept.erase(c.kept.begin() + static_cast<std::ptrdiff_t>(best));
      c.bytes -= bytes_of(out);
      out.clear();
      return out;
    }
  }
  std::vector<float> out;
  out.reserve(n);
  prefer_huge_pages(out.data(), n * sizeof(float));
  return out;
}

void give(std::vector<float>& v) {
  std::vector<float> mine = std::move(v);
  v = std::vector<float>{};
  auto b = bytes_of(mine);
  if (b < min_bytes)
    return;
  auto& c = the_cache();
  std::lock_guard<std::mutex> guard(c.mtx);
  if (c.kept.size() >= max_kept || c.bytes + b > max_cached_bytes)
    return;  // freed on return
  c.bytes += b;
  c.kept.push_back(std::move(mine));
}

size_t cached_bytes() {
  auto& c = the_cache();
  std::lock_guard<std::mutex> guard(c.mtx);
  return c.bytes;
}

}  // namespace keel::tensor_recycler
