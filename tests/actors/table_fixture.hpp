#pragma once
// Shared pieces of the embedding-table tests: a pure row initializer, a
// table configuration in one call, and random pushes of unique keys.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "actors/core/embedding_table.hpp"

namespace keel::table_test {

// A pure function of (key, column), as a model's (seed, table, key) rule is.
inline void test_init(uint64_t key, float* out, uint32_t d) {
  for (uint32_t i = 0; i < d; ++i)
    out[i] = static_cast<float>(mix64(key * 131 + i) >> 40) / 16777216.0f - 0.5f;
}

inline optimizer_config adam() {
  optimizer_config o;
  o.kind = optimizer_kind::adam;
  o.lr = 0.01f;
  return o;
}

inline table_config config_of(std::string name, uint32_t d, optimizer_config o = {},
                              slot_set slots = slot_set::all(default_slot_count)) {
  table_config c;
  c.name = std::move(name);
  c.dim = d;
  c.optimizer = o;
  c.slots = std::move(slots);
  return c;
}

struct push {
  std::vector<uint64_t> keys;
  std::vector<float> grads;
};

// `n` distinct keys below `key_space`, each with a gradient row of `d`.
inline push random_push(std::mt19937_64& rng, size_t n, uint64_t key_space, uint32_t d) {
  push p;
  std::unordered_set<uint64_t> seen;
  std::uniform_real_distribution<float> g(-1.0f, 1.0f);
  while (p.keys.size() < n) {
    uint64_t k = rng() % key_space;
    if (!seen.insert(k).second)
      continue;
    p.keys.push_back(k);
    for (uint32_t i = 0; i < d; ++i) p.grads.push_back(g(rng));
  }
  return p;
}

// The same rows in another order.
inline push shuffled(const push& p, std::mt19937_64& rng, uint32_t d) {
  std::vector<size_t> order(p.keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  push q;
  for (size_t i : order) {
    q.keys.push_back(p.keys[i]);
    q.grads.insert(q.grads.end(), p.grads.begin() + static_cast<long>(i * d),
                   p.grads.begin() + static_cast<long>((i + 1) * d));
  }
  return q;
}

}  // namespace keel::table_test
