#include "actors/core/embedding_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "actors/core/update_rules.hpp"

namespace keel {

namespace {

constexpr uint32_t max_dim = 1u << 20;
constexpr size_t block_target_bytes = size_t{1} << 20;
constexpr uint32_t initial_index_bits = 4;

table_error invalid(const std::string& what) {
  return table_error(table_errc::invalid_config, what);
}

std::string quoted(const std::string& name) {
  return "table '" + name + "'";
}

table_error check_config(const table_config& c, const row_initializer& init) {
  if (c.name.empty())
    return invalid("a table needs a name");
  if (c.dim == 0 || c.dim > max_dim)
    return invalid(quoted(c.name) + ": row dimension " + std::to_string(c.dim) + " (need 1.." +
                   std::to_string(max_dim) + ")");
  if (!init)
    return invalid(quoted(c.name) + ": no row initializer");
  if (c.slots.slot_count() == 0)
    return invalid(quoted(c.name) + ": no hash slots");
  const auto& a = c.admission;
  if (a.min_pushes > count_min_sketch::max_count)
    return invalid(quoted(c.name) + ": admission after " + std::to_string(a.min_pushes) +
                   " pushes (at most 65535)");
  if (a.min_pushes > 1 && (a.sketch_width == 0 || (a.sketch_width & (a.sketch_width - 1)) != 0))
    return invalid(quoted(c.name) + ": sketch width " + std::to_string(a.sketch_width) +
                   " is not a power of two");
  if (a.min_pushes > 1 && (a.sketch_depth == 0 || a.sketch_depth > 16))
    return invalid(quoted(c.name) + ": sketch depth " + std::to_string(a.sketch_depth) +
                   " (need 1..16)");
  return {};
}

uint32_t floor_log2(size_t x) {
  uint32_t b = 0;
  while ((size_t{2} << b) <= x) ++b;
  return b;
}

}  // namespace

table_result<embedding_table> embedding_table::make(table_config cfg, row_initializer init) {
  if (auto e = check_config(cfg, init))
    return e;
  return embedding_table(std::move(cfg), std::move(init));
}

embedding_table::embedding_table(table_config cfg, row_initializer init)
    : cfg_(std::move(cfg)), init_(std::move(init)) {
  state_slots_ = static_cast<uint32_t>(slots_of(cfg_.optimizer));
  header_ = lfu() ? 5 : cfg_.capacity_rows > 0 ? 4 : 2;
  stride_ = header_ + size_t{cfg_.dim} * (1 + state_slots_);
  size_t rows_per_block = std::max<size_t>(1, block_target_bytes / (stride_ * sizeof(float)));
  block_shift_ = floor_log2(rows_per_block);
  block_mask_ = (uint32_t{1} << block_shift_) - 1;
  index_bits_ = initial_index_bits;
  index_.assign(size_t{1} << index_bits_, no_row);
  if (cfg_.admission.min_pushes > 1)
    sketch_ = count_min_sketch(cfg_.admission.sketch_depth, cfg_.admission.sketch_width,
                               cfg_.admission.sketch_seed);
}

table_error embedding_table::check_request(const std::string& name, uint32_t dim) const {
  if (name != cfg_.name)
    return table_error(table_errc::name_mismatch,
                       "a request for table '" + name + "' reached " + quoted(cfg_.name));
  if (dim != cfg_.dim)
    return table_error(table_errc::dim_mismatch, "a request with rows of " + std::to_string(dim) +
                                                     " for " + quoted(cfg_.name) + " of rows of " +
                                                     std::to_string(cfg_.dim));
  return {};
}

// ---- index and arena ----

uint64_t embedding_table::key_at(uint32_t r) const {
  uint64_t k;
  std::memcpy(&k, row_at(r), sizeof k);
  return k;
}

size_t embedding_table::bucket_of(uint64_t key) const {
  // The top bits: the low bits of mix64(key) choose the key's slot, so the
  // keys of one shard have few distinct values there.
  return static_cast<size_t>(mix64(key) >> (64 - index_bits_));
}

uint32_t embedding_table::find(uint64_t key) const {
  const size_t mask = index_.size() - 1;
  for (size_t b = bucket_of(key);; b = (b + 1) & mask) {
    uint32_t r = index_[b];
    if (r == no_row || key_at(r) == key)
      return r;
  }
}

void embedding_table::prefetch(const uint64_t* keys, size_t n) const {
  size_t bucket[prefetch_chunk];
  for (size_t i = 0; i < n; ++i) {
    bucket[i] = bucket_of(keys[i]);
    __builtin_prefetch(&index_[bucket[i]]);
  }
  const size_t row_bytes = stride_ * sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    uint32_t r = index_[bucket[i]];
    if (r == no_row)
      continue;
    const char* row = reinterpret_cast<const char*>(row_at(r));
    for (size_t at = 0; at < row_bytes; at += 64) __builtin_prefetch(row + at);
  }
}

void embedding_table::index_insert(uint64_t key, uint32_t r) {
  const size_t mask = index_.size() - 1;
  size_t b = bucket_of(key);
  while (index_[b] != no_row) b = (b + 1) & mask;
  index_[b] = r;
}

void embedding_table::index_erase(uint64_t key) {
  // Backward-shift deletion (no tombstones): later entries of the probe run
  // whose home bucket is not cyclically within (hole, their bucket] move
  // into the hole, so every lookup still finds its key before an empty bucket.
  const size_t mask = index_.size() - 1;
  size_t hole = bucket_of(key);
  while (key_at(index_[hole]) != key) hole = (hole + 1) & mask;
  for (size_t j = hole;;) {
    j = (j + 1) & mask;
    uint32_t r = index_[j];
    if (r == no_row)
      break;
    size_t home = bucket_of(key_at(r));
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays)
      continue;
    index_[hole] = r;
    hole = j;
  }
  index_[hole] = no_row;
}

void embedding_table::grow_index() {
  ++index_bits_;
  index_.assign(size_t{1} << index_bits_, no_row);
  for (uint32_t r = 0; r < rows_; ++r) index_insert(key_at(r), r);
}

void embedding_table::reserve_rows(uint64_t rows) {
  rows = std::min<uint64_t>(rows, max_rows);
  uint32_t bits = index_bits_;
  while ((rows + 1) * 4 > (uint64_t{1} << bits) * 3) ++bits;
  if (bits == index_bits_)
    return;
  index_bits_ = bits;
  index_.assign(size_t{1} << index_bits_, no_row);
  for (uint32_t r = 0; r < rows_; ++r) index_insert(key_at(r), r);
  blocks_.reserve((rows >> block_shift_) + 1);
  changed_bits_.reserve(rows / 64 + 1);
}

uint32_t embedding_table::append_row(uint64_t key) {
  if ((size_t{rows_} + 1) * 4 > index_.size() * 3)
    grow_index();
  if ((rows_ >> block_shift_) >= blocks_.size())
    blocks_.emplace_back(stride_ << block_shift_);  // untouched until rows are written
  uint32_t r = rows_++;
  if ((r >> 6) >= changed_bits_.size())
    changed_bits_.resize(changed_bits_.size() + (size_t{1} << block_shift_) / 64 + 1, 0);
  std::memcpy(row_at(r), &key, sizeof key);
  index_insert(key, r);
  return r;
}

void embedding_table::init_row(uint32_t r, uint64_t key) {
  float* v = row_at(r) + header_;
  init_(key, v, cfg_.dim);
  for (uint32_t s = 0; s < state_slots_; ++s)
    std::fill_n(v + size_t{cfg_.dim} * (1 + s), cfg_.dim, initial_slot(cfg_.optimizer, s));
}

const float* embedding_table::find_row(uint64_t key) const {
  uint32_t r = find(key);
  return r == no_row ? nullptr : row_at(r) + header_;
}

// ---- pull ----

table_error embedding_table::pull(const uint64_t* keys, size_t n, float* out,
                                  size_t out_floats) const {
  const uint32_t d = cfg_.dim;
  if (out_floats != n * d)
    return table_error(table_errc::block_shape, quoted(cfg_.name) + ": a pull of " +
                                                    std::to_string(n) + " keys into " +
                                                    std::to_string(out_floats) + " floats (need " +
                                                    std::to_string(n * d) + ")");
  for (size_t i = 0; i < n; ++i) {
    if (i % prefetch_chunk == 0)
      prefetch(keys + i, std::min(prefetch_chunk, n - i));
    if (!cfg_.slots.contains_key(keys[i]))
      return table_error(table_errc::key_outside_slots,
                         quoted(cfg_.name) + ": key " + std::to_string(keys[i]) + " (slot " +
                             std::to_string(slot_of(keys[i], cfg_.slots.slot_count())) +
                             ") is not in this shard's slots");
    uint32_t r = find(keys[i]);
    if (r == no_row)
      init_(keys[i], out + i * d, d);
    else
      std::memcpy(out + i * d, row_at(r) + header_, d * sizeof(float));
  }
  return {};
}

// ---- apply ----

table_error embedding_table::check_push(const uint64_t* keys, size_t n, const float* grads,
                                        size_t grad_floats) {
  const uint32_t d = cfg_.dim;
  if (grad_floats != n * d || n > max_rows)
    return table_error(table_errc::block_shape,
                       quoted(cfg_.name) + ": a push of " + std::to_string(n) + " keys with " +
                           std::to_string(grad_floats) + " gradient floats (need " +
                           std::to_string(n * d) + ")");
  // One branch-free pass (exponent bits all ones: NaN or Inf), then the
  // first culprit found for the message.
  uint32_t bad = 0;
  for (size_t j = 0; j < grad_floats; ++j) {
    uint32_t b;
    std::memcpy(&b, grads + j, sizeof b);
    bad |= (b & 0x7f800000u) == 0x7f800000u;
  }
  if (bad) {
    size_t j = 0;
    while (std::isfinite(grads[j])) ++j;
    return table_error(table_errc::non_finite, quoted(cfg_.name) + ": gradient of key " +
                                                   std::to_string(keys[j / d]) + " (row " +
                                                   std::to_string(j / d) + ", column " +
                                                   std::to_string(j % d) + ") is not finite");
  }
  for (size_t i = 0; i < n; ++i)
    if (!cfg_.slots.contains_key(keys[i]))
      return table_error(table_errc::key_outside_slots,
                         quoted(cfg_.name) + ": pushed key " + std::to_string(keys[i]) + " (slot " +
                             std::to_string(slot_of(keys[i], cfg_.slots.slot_count())) +
                             ") is not in this shard's slots");
  return check_duplicates(keys, n);
}

table_error embedding_table::check_duplicates(const uint64_t* keys, size_t n) {
  // A small open-addressing set of positions, at most half full, reused.
  uint32_t bits = 1;
  while ((size_t{1} << bits) < 2 * n) ++bits;
  seen_.assign(size_t{1} << bits, no_row);
  const size_t mask = seen_.size() - 1;
  for (size_t i = 0; i < n; ++i) {
    size_t b = static_cast<size_t>(mix64(keys[i]) >> (64 - bits));
    for (; seen_[b] != no_row; b = (b + 1) & mask)
      if (keys[seen_[b]] == keys[i])
        return table_error(table_errc::duplicate_key,
                           quoted(cfg_.name) + ": key " + std::to_string(keys[i]) +
                               " twice in one push (rows " + std::to_string(seen_[b]) + " and " +
                               std::to_string(i) + ")");
    seen_[b] = static_cast<uint32_t>(i);
  }
  return {};
}

bool embedding_table::admit(uint64_t key) {
  if (cfg_.admission.min_pushes <= 1 || sketch_.add(key) >= cfg_.admission.min_pushes)
    return true;
  ++stats_.admissions_refused;
  return false;
}

table_error embedding_table::apply(const uint64_t* keys, size_t n, const float* grads,
                                   size_t grad_floats, uint64_t t) {
  if (auto e = check_push(keys, n, grads, grad_floats))
    return e;
  if (cfg_.capacity_rows == 0)
    apply_unbounded(keys, n, grads, t);
  else
    apply_bounded(keys, n, grads, t);
  return {};
}

namespace {

// One row's update: values v, its state slots after it.
inline void update_row(const prepared_update& u, float* v, uint32_t d, uint32_t slots,
                       const float* g) {
  apply_prepared(u, v, slots > 0 ? v + d : nullptr, slots > 1 ? v + 2 * size_t{d} : nullptr, g, d);
}

}  // namespace

void embedding_table::apply_unbounded(const uint64_t* keys, size_t n, const float* grads,
                                      uint64_t t) {
  const prepared_update u = prepare_update(cfg_.optimizer, t);
  const uint32_t d = cfg_.dim;
  for (size_t i = 0; i < n; ++i) {
    if (i % prefetch_chunk == 0)
      prefetch(keys + i, std::min(prefetch_chunk, n - i));
    uint32_t r = find(keys[i]);
    if (r == no_row) {
      if (!admit(keys[i]))
        continue;
      if (rows_ == max_rows) {
        ++stats_.full_refused;
        continue;
      }
      r = append_row(keys[i]);
      init_row(r, keys[i]);
    }
    mark_changed(r);
    update_row(u, row_at(r) + header_, d, state_slots_, grads + i * d);
  }
}

void embedding_table::apply_bounded(const uint64_t* keys, size_t n, const float* grads,
                                    uint64_t t) {
  const prepared_update u = prepare_update(cfg_.optimizer, t);
  const uint32_t d = cfg_.dim;
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = static_cast<uint32_t>(i);
  std::sort(order_.begin(), order_.end(),
            [keys](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  // First the rows the table has, so that they are never evicted to make
  // room for the push's new rows; then the new rows, both in key order.
  pending_.clear();
  size_t touched = 0;
  for (uint32_t i : order_) {
    uint32_t r = find(keys[i]);
    if (r == no_row) {
      pending_.push_back(i);
      continue;
    }
    update_row(u, row_at(r) + header_, d, state_slots_, grads + size_t{i} * d);
    mark_changed(r);
    if (lfu()) {
      count_update(r);
    } else {
      unlink(r);
      link_tail(r);
    }
    ++touched;
  }
  victim_scan_ = first_tier_;
  for (uint32_t i : pending_) {
    if (!admit(keys[i]))
      continue;
    uint32_t r = make_room(keys[i], touched, keys);
    if (r == no_row) {
      ++stats_.full_refused;
      continue;
    }
    update_row(u, row_at(r) + header_, d, state_slots_, grads + size_t{i} * d);
    mark_changed(r);
    if (lfu()) {
      uint32_t first = first_tier_;
      if (first == no_row || tiers_[first].count != 1)
        first = make_tier(1, no_row);
      tier_append(first, r);
    } else {
      link_tail(r);
    }
    ++touched;
  }
  victim_scan_ = no_row;
}

// ---- read-outs ----

table_counters embedding_table::counters() const {
  table_counters c = stats_;
  c.rows = rows_;
  c.bytes = bytes();
  return c;
}

size_t embedding_table::bytes() const {
  size_t b =
      sizeof(*this) + cfg_.name.capacity() + cfg_.slots.words().capacity() * sizeof(uint64_t);
  for (const auto& block : blocks_) b += block.capacity() * sizeof(float);
  b += blocks_.capacity() * sizeof(blocks_[0]);
  b += index_.capacity() * sizeof(uint32_t);
  b += sketch_.bytes();
  b += (seen_.capacity() + order_.capacity() + pending_.capacity()) * sizeof(uint32_t);
  b += tiers_.capacity() * sizeof(count_tier);
  b += (changed_bits_.capacity() + evicted_.capacity()) * sizeof(uint64_t);
  return b;
}

void embedding_table::clear_changes() {
  if (changed_ > 0)
    std::fill(changed_bits_.begin(), changed_bits_.end(), 0);
  changed_ = 0;
  evicted_.clear();
  changes_lost_ = false;
}

std::vector<uint64_t> embedding_table::keys_in_order() const {
  std::vector<uint64_t> keys(rows_);
  for (uint32_t r = 0; r < rows_; ++r) keys[r] = key_at(r);
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace keel
