// Embedding-table push and pull (issue 26): rows updated per second by
// embedding_table::apply and rows read per second by pull, at d = 16 and
// d = 1, with keys drawn from a Zipf law as a click log's IDs are, beside a
// ceiling measured in the same run on the same rows: a plain
// std::unordered_map<uint64_t, std::vector<float>> with the same update
// written here (SGD, AdaGrad and Adam, no keel code), each row created at its first touch from the
// same initializer. Also the memory each holds per byte of values and
// optimizer state, measured with mallinfo2 (bytes the allocator handed out)
// and, for keel, beside what embedding_table::bytes() reports.
// Each run starts from empty tables, so row creation is in the figures;
// runs alternate keel and the map; the median is printed. After each run the
// bench checks that both hold the same rows (values and state) bit for bit.
// Then keel alone with a capacity, d = 16 AdaGrad, least recently (lru) and
// least frequently (lfu) updated eviction: once with a capacity the run never
// reaches (what the bounds cost in memory: recency links, and LFU's count
// tier a row) and once with a quarter of the rows (what evicting costs).
// Usage: table_bench [pushes=300] [runs=3] [vocabulary=10000000]
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/core/embedding_table.hpp"

using namespace keel;
using steady = std::chrono::steady_clock;

namespace {

constexpr size_t batch_samples = 8192;
constexpr double zipf_exponent = 1.05;

double seconds_since(steady::time_point t0) {
  return std::chrono::duration<double>(steady::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Bytes the allocator has handed out, from its heap and as mmapped chunks.
size_t heap_bytes() {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

void init_row(uint64_t key, float* out, uint32_t d) {
  for (uint32_t i = 0; i < d; ++i)
    out[i] = static_cast<float>(mix64(key + i) >> 40) / 16777216.0f * 0.02f - 0.01f;
}

struct push {
  std::vector<uint64_t> keys;
  std::vector<float> grads;
};

// The unique IDs of a batch of Zipf draws (the continuous power law's
// inverse, floored: close to Zipf for a bench), hashed to arbitrary 64-bit
// keys, in order of first appearance.
std::vector<push> zipf_pushes(size_t count, uint64_t vocabulary, uint32_t d) {
  std::mt19937_64 rng(2026);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<float> g(0.0f, 0.1f);
  const double a = 1.0 - zipf_exponent;
  const double top = std::pow(static_cast<double>(vocabulary), a) - 1.0;
  std::vector<push> pushes(count);
  std::unordered_set<uint64_t> seen;
  for (auto& p : pushes) {
    seen.clear();
    for (size_t s = 0; s < batch_samples; ++s) {
      auto rank = static_cast<uint64_t>(std::pow(top * u(rng) + 1.0, 1.0 / a));
      uint64_t key = mix64(std::min(rank, vocabulary));
      if (seen.insert(key).second)
        p.keys.push_back(key);
    }
    p.grads.resize(p.keys.size() * d);
    for (auto& x : p.grads) x = g(rng);
  }
  return pushes;
}

// The ceiling: one heap vector a row, [values, state slots], the update
// written out as keel documents it.
using plain_map = std::unordered_map<uint64_t, std::vector<float>>;

void plain_apply(plain_map& m, const optimizer_config& c, uint64_t t, const push& p, uint32_t d,
                 uint32_t slots) {
  const float c1 = static_cast<float>(1.0 - std::pow(double{c.beta1}, static_cast<double>(t)));
  const float c2 = static_cast<float>(1.0 - std::pow(double{c.beta2}, static_cast<double>(t)));
  const float step = c.lr * std::sqrt(c2) / c1;
  for (size_t i = 0; i < p.keys.size(); ++i) {
    std::vector<float>& row = m[p.keys[i]];
    if (row.empty()) {
      row.assign(size_t{d} * (1 + slots), 0.0f);
      init_row(p.keys[i], row.data(), d);
      if (c.kind == optimizer_kind::adagrad)
        std::fill(row.begin() + d, row.end(), c.initial_accumulator);
    }
    const float* g = p.grads.data() + i * d;
    float* v = row.data();
    if (slots == 0) {
      for (uint32_t j = 0; j < d; ++j) v[j] -= c.lr * g[j];
      continue;
    }
    float* m1 = v + d;
    if (c.kind == optimizer_kind::adagrad) {
      for (uint32_t j = 0; j < d; ++j) {
        m1[j] += g[j] * g[j];
        v[j] -= c.lr * g[j] / (std::sqrt(m1[j]) + c.epsilon);
      }
      continue;
    }
    float* m2 = v + 2 * size_t{d};
    for (uint32_t j = 0; j < d; ++j) {
      m1[j] = c.beta1 * m1[j] + (1.0f - c.beta1) * g[j];
      m2[j] = c.beta2 * m2[j] + (1.0f - c.beta2) * g[j] * g[j];
      v[j] -= step * m1[j] / (std::sqrt(m2[j]) + c.epsilon);
    }
  }
}

void plain_pull(const plain_map& m, const push& p, uint32_t d, float* out) {
  for (size_t i = 0; i < p.keys.size(); ++i) {
    auto it = m.find(p.keys[i]);
    if (it == m.end())
      init_row(p.keys[i], out + i * d, d);
    else
      std::memcpy(out + i * d, it->second.data(), d * sizeof(float));
  }
}

struct figures {
  double push_rows_per_s = 0, pull_rows_per_s = 0, heap_bytes = 0, reported_bytes = 0, rows = 0;
  double evictions = 0;
};

figures run_keel(const std::vector<push>& pushes, const optimizer_config& c, uint32_t d,
                 std::vector<float>& out, std::optional<embedding_table>& keep, uint64_t capacity = 0,
                 eviction_policy eviction = eviction_policy::least_recently_updated) {
  figures f;
  size_t heap0 = heap_bytes();
  table_config cfg;
  cfg.name = "bench";
  cfg.dim = d;
  cfg.optimizer = c;
  cfg.capacity_rows = capacity;
  cfg.eviction = eviction;
  auto made = embedding_table::make(cfg, init_row);
  if (!made) {
    std::fprintf(stderr, "table_bench: %s\n", describe(made.error()).c_str());
    std::exit(1);
  }
  keep.emplace(std::move(*made));
  size_t rows = 0;
  auto t0 = steady::now();
  for (size_t s = 0; s < pushes.size(); ++s) {
    const push& p = pushes[s];
    if (auto e = keep->apply(p.keys.data(), p.keys.size(), p.grads.data(), p.grads.size(), s + 1)) {
      std::fprintf(stderr, "table_bench: %s\n", describe(e).c_str());
      std::exit(1);
    }
    rows += p.keys.size();
  }
  f.push_rows_per_s = static_cast<double>(rows) / seconds_since(t0);
  f.heap_bytes = static_cast<double>(heap_bytes() - heap0);
  f.reported_bytes = static_cast<double>(keep->bytes());
  f.rows = static_cast<double>(keep->rows());
  f.evictions = static_cast<double>(keep->counters().evictions);
  t0 = steady::now();
  for (const push& p : pushes)
    (void)keep->pull(p.keys.data(), p.keys.size(), out.data(), p.keys.size() * d);
  f.pull_rows_per_s = static_cast<double>(rows) / seconds_since(t0);
  return f;
}

figures run_plain(const std::vector<push>& pushes, const optimizer_config& c, uint32_t d,
                  uint32_t slots, std::vector<float>& out, plain_map& m) {
  figures f;
  size_t heap0 = heap_bytes();
  size_t rows = 0;
  auto t0 = steady::now();
  for (size_t s = 0; s < pushes.size(); ++s) {
    plain_apply(m, c, s + 1, pushes[s], d, slots);
    rows += pushes[s].keys.size();
  }
  f.push_rows_per_s = static_cast<double>(rows) / seconds_since(t0);
  f.heap_bytes = static_cast<double>(heap_bytes() - heap0);
  f.rows = static_cast<double>(m.size());
  t0 = steady::now();
  for (const push& p : pushes) plain_pull(m, p, d, out.data());
  f.pull_rows_per_s = static_cast<double>(rows) / seconds_since(t0);
  return f;
}

bool same_rows(const embedding_table& t, const plain_map& m, uint32_t d, uint32_t slots) {
  if (t.rows() != m.size())
    return false;
  for (const auto& [key, row] : m) {
    const float* r = t.find_row(key);
    if (r == nullptr || std::memcmp(r, row.data(), size_t{d} * (1 + slots) * sizeof(float)) != 0)
      return false;
  }
  return true;
}

double median_of(const std::vector<figures>& v, double figures::*field) {
  std::vector<double> x;
  for (const auto& f : v) x.push_back(f.*field);
  return median(x);
}

// keel with a capacity, LRU beside LFU (see the top of the file).
void bounded(size_t pushes_n, size_t runs, uint64_t vocabulary) {
  const uint32_t d = 16;
  auto pushes = zipf_pushes(pushes_n, vocabulary, d);
  size_t widest = 0;
  for (const auto& p : pushes) widest = std::max(widest, p.keys.size());
  std::vector<float> out(widest * d);
  optimizer_config c;
  c.kind = optimizer_kind::adagrad;
  c.lr = 0.05f;
  std::optional<embedding_table> unbounded;
  const double all_rows = run_keel(pushes, c, d, out, unbounded).rows;
  unbounded.reset();
  std::printf("\nd = 16 adagrad with a capacity (%.0f rows without one)\n", all_rows);
  std::printf("%-8s %-10s %8s %12s %10s %9s %9s\n", "eviction", "capacity", "rows", "keel push/s", "evictions",
              "keel B/B", "(bytes())");
  for (uint64_t capacity : {uint64_t{1} << 30, static_cast<uint64_t>(all_rows / 4)})
    for (auto policy : {eviction_policy::least_recently_updated, eviction_policy::least_frequently_updated}) {
      std::vector<figures> k(runs);
      for (size_t r = 0; r < runs; ++r) {
        std::optional<embedding_table> table;
        k[r] = run_keel(pushes, c, d, out, table, capacity, policy);
      }
      const double payload = median_of(k, &figures::rows) * d * 2 * sizeof(float);
      std::printf("%-8s %-10llu %8.0f %12.3g %10.0f %9.2f %9.2f\n", to_string(policy),
                  static_cast<unsigned long long>(capacity), median_of(k, &figures::rows),
                  median_of(k, &figures::push_rows_per_s), median_of(k, &figures::evictions),
                  median_of(k, &figures::heap_bytes) / payload, median_of(k, &figures::reported_bytes) / payload);
    }
}

}  // namespace

int main(int argc, char** argv) {
  long pushes_arg = argc > 1 ? std::atol(argv[1]) : 300;
  long runs = argc > 2 ? std::atol(argv[2]) : 3;
  long long vocabulary = argc > 3 ? std::atoll(argv[3]) : 10'000'000;
  if (pushes_arg <= 0 || runs <= 0 || vocabulary <= 1) {
    std::fprintf(stderr,
                 "table_bench: pushes, runs and vocabulary must be positive (vocabulary > 1)\n");
    return 2;
  }
  std::printf(
      "%ld pushes of the unique keys of %zu Zipf(%.2f) draws over %lld IDs, %ld runs, medians\n",
      pushes_arg, batch_samples, zipf_exponent, vocabulary, runs);
  std::printf("%-3s %-7s %-6s %12s %12s %6s %12s %12s %6s %9s %9s %9s\n", "d", "rule", "rows",
              "keel push/s", "map push/s", "ratio", "keel pull/s", "map pull/s", "ratio",
              "keel B/B", "(bytes())", "map B/B");
  for (uint32_t d : {16u, 1u}) {
    auto pushes =
        zipf_pushes(static_cast<size_t>(pushes_arg), static_cast<uint64_t>(vocabulary), d);
    size_t widest = 0;
    for (const auto& p : pushes) widest = std::max(widest, p.keys.size());
    std::vector<float> out(widest * d);
    for (auto kind : {optimizer_kind::sgd, optimizer_kind::adagrad, optimizer_kind::adam}) {
      optimizer_config c;
      c.kind = kind;
      c.lr = 0.05f;
      const uint32_t slots = kind == optimizer_kind::adam      ? 2
                             : kind == optimizer_kind::adagrad ? 1
                                                               : 0;
      std::vector<figures> k(static_cast<size_t>(runs)), p(static_cast<size_t>(runs));
      bool equal = true;
      for (long r = 0; r < runs; ++r) {
        std::optional<embedding_table> table;
        k[static_cast<size_t>(r)] = run_keel(pushes, c, d, out, table);
        plain_map m;
        p[static_cast<size_t>(r)] = run_plain(pushes, c, d, slots, out, m);
        equal = equal && same_rows(*table, m, d, slots);
      }
      auto med = [](const std::vector<figures>& v, double figures::*field) {
        std::vector<double> x;
        for (const auto& f : v) x.push_back(f.*field);
        return median(x);
      };
      double payload = med(k, &figures::rows) * d * (1 + slots) * sizeof(float);
      double kp = med(k, &figures::push_rows_per_s), pp = med(p, &figures::push_rows_per_s);
      double kl = med(k, &figures::pull_rows_per_s), pl = med(p, &figures::pull_rows_per_s);
      std::printf("%-3u %-7s %-6.0f %12.3g %12.3g %6.2f %12.3g %12.3g %6.2f %9.2f %9.2f %9.2f\n", d,
                  to_string(kind), med(k, &figures::rows), kp, pp, kp / pp, kl, pl, kl / pl,
                  med(k, &figures::heap_bytes) / payload,
                  med(k, &figures::reported_bytes) / payload,
                  med(p, &figures::heap_bytes) / payload);
      if (!equal)
        std::printf("  (keel's rows differ from the map's)\n");
    }
  }
  bounded(static_cast<size_t>(pushes_arg), static_cast<size_t>(runs), static_cast<uint64_t>(vocabulary));
  return 0;
}
