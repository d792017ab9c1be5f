#include "actors/core/table_snapshot.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "actors/core/table_codec.hpp"
#include "actors/core/update_rules.hpp"

namespace keel {

using namespace table_wire;

namespace table_wire {

// Sorts `keys` (with their rows) ascending. Keys spread over their range,
// as hashed IDs are, are first dealt into 2^16 buckets by their highest
// varying bits (one counting pass, one scatter), then each bucket is sorted
// on its own, in cache: several times faster than one sort of the whole, and
// never worse in kind (keys bunched into one bucket are sorted as before).
std::vector<std::pair<uint64_t, uint32_t>> sorted_by_key(const std::vector<uint64_t>& keys) {
  const size_t n = keys.size();
  std::vector<std::pair<uint64_t, uint32_t>> out(n);
  if (n == 0)
    return out;
  uint64_t lo = keys[0], hi = keys[0];
  for (uint64_t k : keys) lo = std::min(lo, k), hi = std::max(hi, k);
  // The keys agree above bit `varying`; the 16 bits below it order them.
  const int varying = lo == hi ? 0 : 64 - __builtin_clzll(lo ^ hi);
  const int shift = varying > 16 ? varying - 16 : 0;
  auto bucket = [shift](uint64_t k) { return static_cast<size_t>((k >> shift) & 0xffff); };
  std::vector<uint32_t> start(65537, 0);
  for (uint64_t k : keys) ++start[bucket(k) + 1];
  for (size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  std::vector<uint32_t> next(start.begin(), start.end() - 1);
  for (size_t r = 0; r < n; ++r) out[next[bucket(keys[r])]++] = {keys[r], static_cast<uint32_t>(r)};
  for (size_t b = 0; b + 1 < start.size(); ++b)
    if (start[b + 1] - start[b] > 1)
      std::sort(out.begin() + start[b], out.begin() + start[b + 1]);
  return out;
}

}  // namespace table_wire

std::vector<std::pair<uint64_t, uint32_t>> table_codec::rows_by_key(const embedding_table& t) {
  std::vector<uint64_t> keys(t.rows_);
  for (uint32_t r = 0; r < t.rows_; ++r) keys[r] = t.key_at(r);
  return sorted_by_key(keys);
}

namespace table_wire {

header header_of(const embedding_table& t) {
  const table_config& c = t.config();
  header h;
  if (table_codec::lfu(t))
    h.version = table_snapshot_lfu_version;
  else if (c.capacity_rows == 0)
    h.version = table_snapshot_arena_version;
  h.optimizer = static_cast<uint8_t>(c.optimizer.kind);
  h.dim = c.dim;
  h.state_slots = t.state_slots();
  h.slot_count = c.slots.slot_count();
  h.rows = t.rows();
  h.capacity_rows = c.capacity_rows;
  h.min_pushes = c.admission.min_pushes;
  h.sketch_depth = c.admission.sketch_depth;
  h.sketch_width = c.admission.sketch_width;
  h.name_bytes = static_cast<uint32_t>(c.name.size());
  h.sketch_seed = c.admission.sketch_seed;
  return h;
}

}  // namespace table_wire

uint64_t table_codec::encoded_bytes(const embedding_table& t) {
  return table_snapshot_header_bytes + sizes_of(header_of(t), SIZE_MAX).total + 4;
}

void table_codec::put_blocks(const embedding_table& t, span_writer& w) {
  // Each row as the table holds it (key, values, state): a block's rows
  // are one run of bytes.
  const size_t per_block = size_t{1} << t.block_shift_;
  for (size_t b = 0; b * per_block < t.rows_; ++b) {
    const size_t n = std::min<size_t>(per_block, t.rows_ - b * per_block);
    w.put_bytes(t.blocks_[b].data(), n * t.stride_ * sizeof(float));
  }
}

void table_codec::put_rows_by_key(const embedding_table& t, const header& h, span_writer& w) {
  const auto ranks = eviction_ranks(t);
  const bool counts = has_counts(h);
  const size_t row_bytes = size_t{t.cfg_.dim} * (1 + t.state_slots_) * sizeof(float);
  const auto order = rows_by_key(t);
  for (size_t i = 0; i < order.size(); ++i) {
    if (i + rows_ahead < order.size())
      prefetch(t, order[i + rows_ahead].second);
    const auto [key, r] = order[i];
    w.put(key);
    if (h.capacity_rows > 0)
      w.put(ranks[r]);
    if (counts)
      w.put(update_count(t, r));
    w.put_bytes(values(t, r), row_bytes);
  }
}

uint32_t table_codec::encode(const embedding_table& t, span_source& out) {
  header h = header_of(t);
  h.evictions = t.stats_.evictions;
  h.admissions_refused = t.stats_.admissions_refused;
  h.full_refused = t.stats_.full_refused;
  span_writer w{out};
  put_header(w, h);
  w.put_bytes(t.cfg_.name.data(), t.cfg_.name.size());
  for (uint64_t word : t.cfg_.slots.words()) w.put(word);
  if (in_arena_order(h))
    put_blocks(t, w);
  else
    put_rows_by_key(t, h, w);
  if (h.min_pushes > 1)
    w.put_bytes(t.sketch_.counters().data(), t.sketch_.counters().size() * sizeof(uint16_t));
  w.put(w.crc());
  return w.crc();
}

uint64_t encoded_table_bytes(const embedding_table& table) {
  return table_codec::encoded_bytes(table);
}

uint32_t encode_table_into(const embedding_table& table, const std::vector<byte_span>& out) {
  uint64_t room = 0;
  for (const auto& s : out) room += s.size;
  const uint64_t need = table_codec::encoded_bytes(table);
  if (room != need)
    throw std::invalid_argument("encode_table_into: table '" + table.name() + "' encodes to " +
                                std::to_string(need) + " bytes, the spans hold " +
                                std::to_string(room));
  span_list_source source(out);
  return table_codec::encode(table, source);
}

uint32_t encode_table_into(const embedding_table& table, span_source& out) {
  return table_codec::encode(table, out);
}

std::vector<unsigned char> encode_table(const embedding_table& table) {
  std::vector<unsigned char> out(table_codec::encoded_bytes(table));
  std::vector<byte_span> whole = {{out.data(), out.size()}};
  span_list_source source(whole);
  table_codec::encode(table, source);
  return out;
}

table_error table_codec::restore_rows(embedding_table& t, reader& in, uint64_t rows) {
  t.reserve_rows(rows);  // the index sized once, not grown (and rehashed) row by row
  const table_config& c = t.cfg_;
  const size_t floats = size_t{c.dim} * (1 + t.state_slots_);
  const bool bounded = c.capacity_rows > 0, lfu = t.lfu();
  std::vector<uint32_t> row_of_rank(bounded ? rows : 0, embedding_table::no_row);
  std::vector<uint32_t> count_of_rank(lfu ? rows : 0);
  // Rows are stored one after the other: the index bucket of the key a few
  // rows ahead is asked for while this one is inserted (a cache miss each).
  const size_t stride = 8 + (bounded ? 4 : 0) + (lfu ? 4 : 0) + floats * sizeof(float);
  constexpr uint64_t ahead = 16;
  for (uint64_t i = 0; i < rows; ++i) {
    if (i + ahead < rows) {
      uint64_t later;
      std::memcpy(&later, in.at + ahead * stride, sizeof later);
      __builtin_prefetch(&t.index_[t.bucket_of(later)]);
    }
    uint64_t key = in.get<uint64_t>();
    if (i > 0 && key <= t.key_at(static_cast<uint32_t>(i - 1)))
      return key == t.key_at(static_cast<uint32_t>(i - 1))
                 ? damage(table_errc::duplicate_key, "key " + std::to_string(key) + " stored twice")
                 : damage(table_errc::malformed, "row " + std::to_string(i) + "'s key " +
                                                     std::to_string(key) +
                                                     " is not above the one before it");
    if (!c.slots.contains_key(key))
      return damage(table_errc::key_outside_slots,
                    "key " + std::to_string(key) + " (slot " +
                        std::to_string(slot_of(key, c.slots.slot_count())) +
                        ") is outside the shard's slots");
    uint32_t rank = bounded ? in.get<uint32_t>() : 0;
    if (bounded && (rank >= rows || row_of_rank[rank] != embedding_table::no_row))
      return damage(table_errc::count_mismatch, "recency rank " + std::to_string(rank) +
                                                    " of key " + std::to_string(key) +
                                                    " is out of range or repeated");
    if (lfu) {
      count_of_rank[rank] = in.get<uint32_t>();
      if (count_of_rank[rank] == 0)
        return damage(table_errc::count_mismatch,
                      "update count 0 of key " + std::to_string(key) + " (a row has at least 1)");
    }
    uint32_t r = t.append_row(key);  // rows arrive in key order: row i is the i-th key
    float* v = t.row_at(r) + t.header_;
    std::memcpy(v, in.at, floats * sizeof(float));
    in.at += floats * sizeof(float);
    if (!all_finite(v, floats))
      return damage(table_errc::non_finite,
                    "row of key " + std::to_string(key) + " holds NaN or Inf");
    if (bounded)
      row_of_rank[rank] = r;
  }
  if (!lfu) {
    for (uint32_t r : row_of_rank) t.link_tail(r);
    return {};
  }
  uint32_t cursor = embedding_table::no_row;
  for (uint64_t i = 0; i < rows; ++i) {
    if (i > 0 && count_of_rank[i] < count_of_rank[i - 1])
      return damage(table_errc::count_mismatch,
                    "update count " + std::to_string(count_of_rank[i]) + " at eviction rank " +
                        std::to_string(i) + " is below the " +
                        std::to_string(count_of_rank[i - 1]) + " before it");
    t.place_at_count(row_of_rank[i], count_of_rank[i], cursor);
  }
  return {};
}

table_error table_codec::restore_arena_rows(embedding_table& t, parts_reader& in, uint64_t rows) {
  if (rows > embedding_table::max_rows)
    return damage(table_errc::count_mismatch, std::to_string(rows) + " rows, more than a table holds (" +
                                                  std::to_string(embedding_table::max_rows) + ")");
  t.reserve_rows(rows);
  const table_config& c = t.cfg_;
  const size_t floats = size_t{c.dim} * (1 + t.state_slots_);
  const size_t row_bytes = t.stride_ * sizeof(float);  // the key's 8 bytes, then the floats
  const size_t per_block = size_t{1} << t.block_shift_;
  const size_t mask = t.index_.size() - 1;
  // A byte of each key's hash beside its bucket: a duplicate is looked for
  // only among the keys of the bucket's run with the same byte, so the rows
  // of other keys are not read (a cache miss each).
  std::vector<uint8_t> tags(t.index_.size());
  const auto tag_of = [](uint64_t key) { return static_cast<uint8_t>(mix64(key) >> 24); };
  const auto key_of = [&](const float* block, size_t j) {
    uint64_t key;
    std::memcpy(&key, block + j * t.stride_, sizeof key);
    return key;
  };
  constexpr size_t ahead = 16;
  for (uint64_t first = 0; first < rows; first += per_block) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(per_block, rows - first));
    t.blocks_.emplace_back(t.stride_ << t.block_shift_);
    float* block = t.blocks_.back().data();
    in.copy(block, n * row_bytes);
    for (size_t j = 0; j < n; ++j) {
      if (j + ahead < n) {  // the bucket of a key a few rows on, asked for now
        const size_t b = t.bucket_of(key_of(block, j + ahead));
        __builtin_prefetch(&t.index_[b]);
        __builtin_prefetch(&tags[b]);
      }
      const uint64_t key = key_of(block, j);
      if (!c.slots.contains_key(key))
        return damage(table_errc::key_outside_slots,
                      "key " + std::to_string(key) + " (slot " +
                          std::to_string(slot_of(key, c.slots.slot_count())) + ") is outside the shard's slots");
      if (!all_finite(block + j * t.stride_ + t.header_, floats))
        return damage(table_errc::non_finite, "row of key " + std::to_string(key) + " holds NaN or Inf");
      const uint8_t tag = tag_of(key);
      size_t b = t.bucket_of(key);
      for (; t.index_[b] != embedding_table::no_row; b = (b + 1) & mask)
        if (tags[b] == tag && t.key_at(t.index_[b]) == key)
          return damage(table_errc::duplicate_key, "key " + std::to_string(key) + " stored twice");
      t.index_[b] = static_cast<uint32_t>(first + j);
      tags[b] = tag;
    }
  }
  t.rows_ = static_cast<uint32_t>(rows);
  t.changed_bits_.assign(rows / 64 + 1, 0);
  return {};
}

void table_codec::restore_rest(embedding_table& t, parts_reader& in, const header& h) {
  if (h.min_pushes > 1) {
    auto& counters = t.sketch_.counters();
    in.copy(counters.data(), counters.size() * sizeof(uint16_t));
  }
  t.stats_.evictions = h.evictions;
  t.stats_.admissions_refused = h.admissions_refused;
  t.stats_.full_refused = h.full_refused;
}

namespace {

// Length, magic, version and counts of the `n` bytes whose first
// table_snapshot_header_bytes are `head`: whether they can be a table.
table_error check_header(const unsigned char* head, size_t n, header& h) {
  reader in{head};
  h = get_header(in);
  if (h.magic != table_snapshot_magic)
    return damage(table_errc::malformed,
                  "not a table snapshot (magic " + std::to_string(h.magic) + ")");
  if (auto e = check_version(h, table_snapshot_version, "format", true))
    return e;
  if (auto e = check_header_fields(h))
    return e;
  const size_t body = n - table_snapshot_header_bytes - 4;
  body_sizes s = sizes_of(h, body);
  if (h.rows > 0 && s.rows == 0)
    return damage(table_errc::count_mismatch,
                  std::to_string(h.rows) + " rows cannot fit " + std::to_string(n) + " bytes");
  if (s.total != body)
    return damage(table_errc::count_mismatch, "its counts make " + std::to_string(s.total) +
                                                  " bytes after the header, it has " +
                                                  std::to_string(body));
  return {};
}

// The trailing CRC32C against the bytes before it.
table_error check_crc(const std::vector<byte_view>& parts, size_t n) {
  uint32_t actual = crc32c_empty, stored = 0;
  size_t before = 0;  // bytes of the parts before this one
  for (const auto& p : parts) {
    const size_t covered = std::min(p.size, n - 4 > before ? n - 4 - before : 0);
    actual = crc32c_extend(actual, p.data, covered);
    for (size_t i = covered; i < p.size; ++i)  // the stored CRC's bytes, wherever they lie
      stored |= uint32_t{p.data[i]} << (8 * (before + i - (n - 4)));
    before += p.size;
  }
  if (stored != actual)
    return damage(table_errc::crc_mismatch, "CRC32C " + std::to_string(actual) + " of its bytes, " +
                                                std::to_string(stored) + " stored");
  return {};
}

}  // namespace

namespace table_wire {

table_error check_version(const header& h, uint16_t base, const char* what, bool arena_order) {
  const bool arena = arena_order && in_arena_order(h);
  if (h.version != base && h.version != table_snapshot_lfu_version && !arena)
    return damage(table_errc::malformed,
                  std::string(what) + " version " + std::to_string(h.version) + " (this build reads " +
                      std::to_string(base) + (arena_order ? ", " : " and ") +
                      std::to_string(table_snapshot_lfu_version) +
                      (arena_order ? " and " + std::to_string(table_snapshot_arena_version) : "") + ")");
  if (arena && h.capacity_rows > 0)
    return damage(table_errc::malformed, std::string(what) + " version " + std::to_string(h.version) +
                                             " (rows in the table's order) with a capacity");
  if (has_counts(h) && h.capacity_rows == 0)
    return damage(table_errc::malformed, std::string(what) + " version " + std::to_string(h.version) +
                                             " (update counts for LFU eviction) without a capacity");
  return {};
}

table_error check_header_fields(const header& h) {
  // A custom rule's slots are its own (at most 2); the others' follow the kind.
  const bool custom = h.optimizer == static_cast<uint8_t>(optimizer_kind::custom);
  if (h.optimizer > static_cast<uint8_t>(optimizer_kind::custom) ||
      (custom ? h.state_slots > 2 : h.state_slots != slots_per_parameter(static_cast<optimizer_kind>(h.optimizer))))
    return damage(table_errc::count_mismatch, "optimizer kind " + std::to_string(h.optimizer) +
                                                  " with " + std::to_string(h.state_slots) +
                                                  " state slots");
  if (h.min_pushes > 1 && (h.sketch_depth > 16 || h.sketch_width > (1u << 30)))
    return damage(table_errc::count_mismatch, "a sketch of " + std::to_string(h.sketch_depth) +
                                                  " x " + std::to_string(h.sketch_width) +
                                                  " counters");
  return {};
}

// The snapshot's shape against the restoring shard's configuration.
table_error check_shape(const header& h, const std::string& name,
                        const std::vector<uint64_t>& bitmap, const embedding_table& t) {
  const table_config& c = t.config();
  if (h.dtype != 0)
    return mismatch(table_errc::dtype_mismatch, "element type", h.dtype, 0);
  if (name != c.name)
    return table_error(table_errc::name_mismatch, "table snapshot: of table '" + name +
                                                      "', the shard's table is '" + c.name + "'");
  if (h.dim != c.dim)
    return mismatch(table_errc::dim_mismatch, "row dimension", h.dim, c.dim);
  if (h.optimizer != static_cast<uint8_t>(c.optimizer.kind))
    return table_error(table_errc::optimizer_mismatch,
                       std::string("table snapshot: optimizer state of ") +
                           to_string(static_cast<optimizer_kind>(h.optimizer)) +
                           ", the shard's table uses " + to_string(c.optimizer.kind));
  if (h.slot_count != c.slots.slot_count())
    return mismatch(table_errc::slots_mismatch, "hash slot count", h.slot_count,
                    c.slots.slot_count());
  if (bitmap != c.slots.words()) {
    uint32_t owned = 0;
    for (uint64_t w : bitmap) owned += static_cast<uint32_t>(__builtin_popcountll(w));
    return table_error(table_errc::slots_mismatch,
                       "table snapshot: of a shard owning other slots (" + std::to_string(owned) +
                           " slots, the shard owns " + std::to_string(c.slots.size()) + ")");
  }
  if (h.capacity_rows != c.capacity_rows)
    return mismatch(table_errc::options_mismatch, "capacity", h.capacity_rows, c.capacity_rows);
  const auto evicts = [](bool lfu) {
    return long_name(lfu ? eviction_policy::least_frequently_updated
                         : eviction_policy::least_recently_updated);
  };
  if (h.capacity_rows > 0 && has_counts(h) != table_codec::lfu(t))
    return table_error(table_errc::options_mismatch,
                       std::string("table snapshot: of a table evicting the ") + evicts(has_counts(h)) +
                           " row, the shard's table evicts the " + evicts(table_codec::lfu(t)));
  const auto& a = c.admission;
  bool filtered = a.min_pushes > 1;
  if (h.min_pushes != a.min_pushes ||
      (filtered && (h.sketch_depth != a.sketch_depth || h.sketch_width != a.sketch_width ||
                    h.sketch_seed != a.sketch_seed)))
    return table_error(
        table_errc::options_mismatch,
        "table snapshot: admission after " + std::to_string(h.min_pushes) + " pushes, sketch " +
            std::to_string(h.sketch_depth) + " x " + std::to_string(h.sketch_width) + " seed " +
            std::to_string(h.sketch_seed) + ", the shard's table admits after " +
            std::to_string(a.min_pushes) + ", sketch " + std::to_string(a.sketch_depth) + " x " +
            std::to_string(a.sketch_width) + " seed " + std::to_string(a.sketch_seed));
  if (h.capacity_rows > 0 && h.rows > h.capacity_rows)
    return damage(table_errc::count_mismatch, std::to_string(h.rows) + " rows above its capacity " +
                                                  std::to_string(h.capacity_rows));
  return {};
}

}  // namespace table_wire

table_result<embedding_table> decode_table(const unsigned char* data, size_t n,
                                           const table_config& expected, row_initializer init, table_crc crc) {
  return decode_table(std::vector<byte_view>{{data, n}}, expected, std::move(init), crc);
}

table_result<embedding_table> decode_table(const std::vector<byte_view>& parts, const table_config& expected,
                                           row_initializer init, table_crc crc) {
  size_t n = 0;
  for (const auto& p : parts) n += p.size;
  if (n < table_snapshot_header_bytes + 4)
    return damage(table_errc::malformed, std::to_string(n) + " bytes, shorter than a header (" +
                                             std::to_string(table_snapshot_header_bytes + 4) + ")");
  parts_reader in(parts);
  unsigned char head[table_snapshot_header_bytes];
  in.copy(head, sizeof head);
  header h;
  if (auto e = check_header(head, n, h))
    return e;
  if (!in_arena_order(h) && parts.size() > 1) {  // rows read in place: gathered first
    std::vector<unsigned char> whole(n);
    parts_reader(parts).copy(whole.data(), n);
    return decode_table(whole.data(), n, expected, std::move(init), crc);
  }
  if (crc == table_crc::check)
    if (auto e = check_crc(parts, n))
      return e;
  auto t = embedding_table::make(expected, std::move(init));
  if (!t)
    return t.error();
  std::string name(h.name_bytes, '\0');
  in.copy(name.data(), name.size());
  std::vector<uint64_t> bitmap((uint64_t{h.slot_count} + 63) / 64);
  for (auto& w : bitmap) w = in.get<uint64_t>();
  if (auto e = check_shape(h, name, bitmap, *t))
    return e;
  if (in_arena_order(h)) {
    if (auto e = table_codec::restore_arena_rows(*t, in, h.rows))
      return e;
    table_codec::restore_rest(*t, in, h);
    return t;
  }
  // One part: the rows read where they lie.
  const size_t at = table_snapshot_header_bytes + h.name_bytes + bitmap.size() * 8;
  reader rows{parts[0].data + at};
  if (auto e = table_codec::restore_rows(*t, rows, h.rows))
    return e;
  const std::vector<byte_view> rest{{rows.at, static_cast<size_t>(parts[0].data + n - rows.at)}};
  parts_reader after(rest);
  table_codec::restore_rest(*t, after, h);
  return t;
}

}  // namespace keel
