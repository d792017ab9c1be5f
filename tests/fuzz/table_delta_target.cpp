// fuzz_one_table_delta: bytes -> apply_table_delta on a fixed parent table,
// the path a restarted shard's tables take from a delta file (see
// fuzz_targets.hpp and table_delta_input.hpp).

#include <cstring>
#include <stdexcept>

#include "actors/core/table_delta.hpp"
#include "actors/core/table_snapshot.hpp"
#include "fuzz_targets.hpp"
#include "invariant.hpp"
#include "storage/crc32c.hpp"
#include "table_delta_input.hpp"

namespace keel::fuzz {

namespace {

constexpr const char* target = "fuzz_table_delta";

void init(uint64_t key, float* out, uint32_t d) {
  for (uint32_t i = 0; i < d; ++i) out[i] = static_cast<float>(mix64(key + i) >> 40) / 16777216.0f - 0.5f;
}

void push_keys(embedding_table& t, uint64_t first, size_t n, uint64_t step) {
  std::vector<uint64_t> keys;
  for (size_t i = 0; i < n; ++i) keys.push_back(first + i * 7);
  std::vector<float> g(keys.size() * t.dim(), 0.25f);
  if (auto e = t.apply(keys.data(), keys.size(), g.data(), g.size(), step))
    throw std::logic_error("fuzz_table_delta: the parent's pushes failed: " + describe(e));
}

// A table that its own full snapshot decodes back to: valid whatever befell it.
void require_valid(const embedding_table& t, const table_config& c, const std::string& when) {
  auto bytes = encode_table(t);
  auto back = decode_table(bytes.data(), bytes.size(), c, init);
  require(static_cast<bool>(back), target, when + ": the table no longer encodes to a snapshot that decodes");
  require(content_sha256(*back) == content_sha256(t), target, when + ": the table's snapshot decodes to another table");
}

}  // namespace

table_config delta_table_config(uint8_t flags) {
  table_config c;
  c.name = "fuzzed";
  c.dim = 2;
  c.optimizer.kind = (flags & 8) ? optimizer_kind::adam : optimizer_kind::sgd;
  c.optimizer.lr = 0.1f;
  c.capacity_rows = (flags & 2) ? 24 : 0;
  if (flags & 16)
    c.eviction = eviction_policy::least_frequently_updated;
  if (flags & 4) {
    c.admission.min_pushes = 2;
    c.admission.sketch_width = 64;
    c.admission.sketch_depth = 2;
  }
  return c;
}

embedding_table delta_parent(uint8_t flags) {
  auto t = embedding_table::make(delta_table_config(flags), init);
  if (!t)
    throw std::logic_error("fuzz_table_delta: " + describe(t.error()));
  for (uint64_t s = 1; s <= 4; ++s) push_keys(*t, s * 3, 12, s);
  t->clear_changes();
  return std::move(*t);
}

std::vector<unsigned char> delta_seed(uint8_t flags) {
  auto t = delta_parent(flags);
  for (uint64_t s = 5; s <= 7; ++s) push_keys(t, s * 5, 10, s);
  auto d = encode_table_delta(t);
  d.insert(d.begin(), flags);
  return d;
}

int fuzz_one_table_delta(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  const uint8_t flags = data[0];
  std::vector<unsigned char> delta(data + 1, data + size);
  if ((flags & 1) && delta.size() >= 4) {
    uint32_t crc = crc32c(delta.data(), delta.size() - 4);
    std::memcpy(delta.data() + delta.size() - 4, &crc, 4);
  }
  const auto c = delta_table_config(flags);
  auto t = delta_parent(flags);
  auto err = apply_table_delta(t, delta.data(), delta.size());
  if (err) {
    require(encode_table(t) == encode_table(delta_parent(flags)), target, "a refused delta changed the table");
    return 0;
  }
  require_valid(t, c, "after an accepted delta");
  require(t.changed_rows() == 0, target, "an applied delta left rows marked changed");
  auto again = delta_parent(flags);
  require(!apply_table_delta(again, delta.data(), delta.size()), target, "an accepted delta refused the second time");
  require(content_sha256(again) == content_sha256(t), target, "one delta applied twice gave two tables");
  return 0;
}

}  // namespace keel::fuzz
