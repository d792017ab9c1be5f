#include "actors/core/table_delta.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "actors/core/table_codec.hpp"

namespace keel {

using namespace table_wire;

std::vector<uint32_t> table_codec::changed_row_numbers(const embedding_table& t) {
  std::vector<uint32_t> out;
  out.reserve(t.changed_);
  for (size_t w = 0; w < t.changed_bits_.size(); ++w)
    for (uint64_t bits = t.changed_bits_[w]; bits != 0; bits &= bits - 1)
      out.push_back(static_cast<uint32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
  return out;
}

void table_codec::remove_row(embedding_table& t, uint32_t r) {
  const bool lfu = t.lfu(), bounded = t.cfg_.capacity_rows > 0 && !lfu;  // bounded: the LRU list
  if (lfu)
    t.tier_remove(r);
  else if (bounded)
    t.unlink(r);
  t.index_erase(t.key_at(r));
  const uint32_t last = t.rows_ - 1;
  if (r != last) {
    // The last row moves into r: its index bucket and its neighbours follow.
    const uint64_t key = t.key_at(last);
    std::memcpy(t.row_at(r), t.row_at(last), t.stride_ * sizeof(float));
    const size_t mask = t.index_.size() - 1;
    size_t b = t.bucket_of(key);
    while (t.index_[b] != last) b = (b + 1) & mask;
    t.index_[b] = r;
    if (bounded || lfu) {  // its list: the LRU order, or its count's tier
      uint32_t& head = lfu ? t.tiers_[t.tier_of(r)].head : t.head_;
      uint32_t& tail = lfu ? t.tiers_[t.tier_of(r)].tail : t.tail_;
      uint32_t p = t.link(r, 0), n = t.link(r, 1);
      if (p != embedding_table::no_row)
        t.set_link(p, 1, r);
      else
        head = r;
      if (n != embedding_table::no_row)
        t.set_link(n, 0, r);
      else
        tail = r;
    }
  }
  --t.rows_;
}

uint32_t table_codec::put_row_at(embedding_table& t, uint32_t r, uint64_t key, const float* values) {
  const bool listed = t.cfg_.capacity_rows > 0 && !t.lfu();  // the LRU list
  if (r == embedding_table::no_row)
    r = t.append_row(key);
  else if (listed)
    t.unlink(r);
  std::memcpy(t.row_at(r) + t.header_, values, size_t{t.cfg_.dim} * (1 + t.state_slots_) * sizeof(float));
  if (listed)
    t.link_tail(r);
  return r;
}

namespace {

struct delta_sizes {
  // total: every byte after the 104-byte header but the CRC; UINT64_MAX when
  // the counts could not fit `available` bytes (never equal to a length).
  uint64_t row = 0, total = UINT64_MAX;
};

delta_sizes delta_sizes_of(const header& h, uint64_t changed, uint64_t removed, uint64_t available) {
  delta_sizes s;
  s.row = row_prefix_bytes(h) + uint64_t{h.dim} * (1 + uint64_t{h.state_slots}) * 4;
  if (changed > available / s.row || removed > available / 8)
    return s;
  const uint64_t bitmap = (uint64_t{h.slot_count} + 63) / 64 * 8;
  const uint64_t sketch = h.min_pushes > 1 ? uint64_t{h.sketch_depth} * h.sketch_width * 2 : 0;
  s.total = h.name_bytes + bitmap + changed * s.row + removed * 8 + sketch;
  return s;
}

// LFU: the changed rows, tier by tier in ascending count, each tier's
// oldest first. They are the tail of their tier (appended since the mark,
// the unchanged rows before it), found walking back from each tail.
std::vector<uint32_t> changed_in_tiers(const embedding_table& t) {
  std::vector<uint32_t> rows;
  rows.reserve(t.changed_rows());
  for (uint32_t k = table_codec::first_tier(t); k != table_codec::no_row; k = table_codec::next_tier(t, k)) {
    const size_t from = rows.size();
    for (uint32_t r = table_codec::tier_tail(t, k); r != table_codec::no_row && table_codec::is_changed(t, r);
         r = table_codec::previous(t, r))
      rows.push_back(r);
    std::reverse(rows.begin() + static_cast<std::ptrdiff_t>(from), rows.end());
  }
  if (rows.size() != t.changed_rows())
    throw std::logic_error("table '" + t.name() + "': its changed rows are not the most recent ones of their counts");
  return rows;
}

header delta_header_of(const embedding_table& t) {
  header h = header_of(t);
  h.magic = table_delta_magic;
  h.version = table_codec::lfu(t)                 ? table_delta_lfu_version
              : t.config().capacity_rows == 0 ? table_delta_arena_version
                                              : table_delta_version;
  h.evictions = table_codec::stats(t).evictions;
  h.admissions_refused = table_codec::stats(t).admissions_refused;
  h.full_refused = table_codec::stats(t).full_refused;
  return h;
}

}  // namespace

table_delta_plan plan_table_delta(const embedding_table& t) {
  if (!t.changes_complete())
    throw std::logic_error("table '" + t.name() + "': its changes since the last snapshot were not all kept");
  table_delta_plan plan;
  const uint64_t n = t.changed_rows();
  std::vector<uint32_t> rows;  // changed row numbers; with a capacity in eviction order, first to go first
  if (table_codec::lfu(t)) {
    rows = changed_in_tiers(t);
  } else if (t.config().capacity_rows > 0) {
    rows.resize(n);
    uint32_t r = table_codec::tail(t);
    for (uint64_t i = 0; i < n; ++i, r = table_codec::previous(t, r)) {
      if (r == table_codec::no_row || !table_codec::is_changed(t, r))
        throw std::logic_error("table '" + t.name() + "': its changed rows are not the most recent ones");
      rows[n - 1 - i] = r;
    }
  } else {
    rows = table_codec::changed_row_numbers(t);
  }
  std::vector<uint64_t> keys(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) keys[i] = table_codec::key_at(t, rows[i]);
  if (t.config().capacity_rows == 0) {  // in the table's order: the rows' own, ascending
    plan.changed.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) plan.changed[i] = {keys[i], rows[i]};
    plan.bytes = table_delta_header_bytes +
                 delta_sizes_of(delta_header_of(t), plan.changed.size(), 0, UINT64_MAX).total + 4;
    return plan;  // nothing is removed from a table without a capacity
  }
  plan.changed = sorted_by_key(keys);  // (key, position in `rows`)
  if (t.config().capacity_rows > 0)
    for (auto& [key, at] : plan.changed) plan.ranks.push_back(at);  // the position is the rank
  if (table_codec::lfu(t))
    for (auto& [key, at] : plan.changed) plan.counts.push_back(table_codec::update_count(t, rows[at]));
  for (auto& [key, at] : plan.changed) at = rows[at];
  plan.removed = t.evicted_keys();
  std::sort(plan.removed.begin(), plan.removed.end());
  plan.removed.erase(std::unique(plan.removed.begin(), plan.removed.end()), plan.removed.end());
  plan.removed.erase(std::remove_if(plan.removed.begin(), plan.removed.end(),
                                    [&](uint64_t k) { return t.find_row(k) != nullptr; }),
                     plan.removed.end());
  const header h = delta_header_of(t);
  plan.bytes = table_delta_header_bytes +
               delta_sizes_of(h, plan.changed.size(), plan.removed.size(), UINT64_MAX).total + 4;
  return plan;
}

uint32_t encode_table_delta_into(const embedding_table& t, const table_delta_plan& plan,
                                 const std::vector<byte_span>& out) {
  uint64_t room = 0;
  for (const auto& s : out) room += s.size;
  if (room != plan.bytes)
    throw std::invalid_argument("encode_table_delta_into: table '" + t.name() + "''s delta is " +
                                std::to_string(plan.bytes) + " bytes, the spans hold " + std::to_string(room));
  span_list_source source(out);
  return encode_table_delta_into(t, plan, source);
}

uint32_t encode_table_delta_into(const embedding_table& t, const table_delta_plan& plan, span_source& out) {
  const header h = delta_header_of(t);
  span_writer w{out};
  put_header(w, h);
  w.put(uint64_t{plan.changed.size()});
  w.put(uint64_t{plan.removed.size()});
  w.put_bytes(t.name().data(), t.name().size());
  for (uint64_t word : t.config().slots.words()) w.put(word);
  const size_t row_bytes = size_t{t.dim()} * (1 + t.state_slots()) * sizeof(float);
  for (size_t i = 0; i < plan.changed.size(); ++i) {
    if (i + rows_ahead < plan.changed.size())
      table_codec::prefetch(t, plan.changed[i + rows_ahead].second);
    w.put(plan.changed[i].first);
    if (h.capacity_rows > 0)
      w.put(plan.ranks[i]);
    if (has_counts(h))
      w.put(plan.counts[i]);
    w.put_bytes(table_codec::values(t, plan.changed[i].second), row_bytes);
  }
  for (uint64_t k : plan.removed) w.put(k);
  if (h.min_pushes > 1) {
    const auto& c = table_codec::sketch(t).counters();
    w.put_bytes(c.data(), c.size() * sizeof(uint16_t));
  }
  w.put(w.crc());
  return w.crc();
}

std::vector<unsigned char> encode_table_delta(const embedding_table& t) {
  auto plan = plan_table_delta(t);
  std::vector<unsigned char> out(plan.bytes);
  encode_table_delta_into(t, plan, {{out.data(), out.size()}});
  return out;
}

namespace {

// The header and the counts after it, with the length they imply.
table_error read_delta_header(const unsigned char* data, size_t n, header& h, table_delta_counts& c) {
  if (n < table_delta_header_bytes + 4)
    return damage(table_errc::malformed, "delta of " + std::to_string(n) + " bytes, shorter than a header (" +
                                             std::to_string(table_delta_header_bytes + 4) + ")");
  reader in{data};
  h = get_header(in);
  if (h.magic != table_delta_magic)
    return damage(table_errc::malformed, "not a table delta (magic " + std::to_string(h.magic) + ")");
  if (auto e = check_version(h, table_delta_version, "delta format", true))
    return e;
  if (auto e = check_header_fields(h))
    return e;
  c.changed = in.get<uint64_t>();
  c.removed = in.get<uint64_t>();
  if (in_arena_order(h) && c.removed > 0)
    return damage(table_errc::malformed, "delta of a table without a capacity that removes " +
                                             std::to_string(c.removed) + " keys (only eviction removes rows)");
  c.rows_after = h.rows;
  const uint64_t body = n - table_delta_header_bytes - 4;
  auto s = delta_sizes_of(h, c.changed, c.removed, body);
  if (s.total != body)
    return damage(table_errc::count_mismatch, "a delta whose counts (" + std::to_string(c.changed) +
                                                  " changed rows, " + std::to_string(c.removed) +
                                                  " removed keys) do not make its " + std::to_string(n) + " bytes");
  return {};
}

// The changed rows and removed keys, checked (not yet applied).
struct delta_body {
  std::vector<uint64_t> keys;
  std::vector<const unsigned char*> values;  // per changed row (unaligned)
  std::vector<uint32_t> by_rank;             // with a capacity: changed row indices, first to go first
  std::vector<uint32_t> counts;              // with LFU: per changed row
  std::vector<uint64_t> removed;
};

table_error check_rows(reader& in, const header& h, const table_delta_counts& c, const embedding_table& t,
                       delta_body& out) {
  const auto& slots = t.config().slots;
  const bool bounded = h.capacity_rows > 0;
  const size_t floats = size_t{h.dim} * (1 + h.state_slots);
  out.by_rank.assign(bounded ? c.changed : 0, UINT32_MAX);
  std::vector<float> row(floats);
  for (uint64_t i = 0; i < c.changed; ++i) {
    uint64_t key = in.get<uint64_t>();
    if (i > 0 && !in_arena_order(h) && key <= out.keys.back())
      return key == out.keys.back() ? damage(table_errc::duplicate_key, "delta: key " + std::to_string(key) + " twice")
                                    : damage(table_errc::malformed, "delta: changed row " + std::to_string(i) +
                                                                        "'s key is not above the one before it");
    if (!slots.contains_key(key))
      return damage(table_errc::key_outside_slots, "delta: key " + std::to_string(key) + " is outside the shard's slots");
    if (bounded) {
      uint32_t rank = in.get<uint32_t>();
      if (rank >= c.changed || out.by_rank[rank] != UINT32_MAX)
        return damage(table_errc::count_mismatch, "delta: recency rank " + std::to_string(rank) + " of key " +
                                                      std::to_string(key) + " is out of range or repeated");
      out.by_rank[rank] = static_cast<uint32_t>(i);
    }
    if (has_counts(h)) {
      out.counts.push_back(in.get<uint32_t>());
      if (out.counts.back() == 0)
        return damage(table_errc::count_mismatch, "delta: update count 0 of key " + std::to_string(key));
    }
    std::memcpy(row.data(), in.at, floats * sizeof(float));
    if (!all_finite(row.data(), floats))
      return damage(table_errc::non_finite, "delta: row of key " + std::to_string(key) + " holds NaN or Inf");
    out.keys.push_back(key);
    out.values.push_back(in.at);
    in.at += floats * sizeof(float);
  }
  size_t j = 0;  // merge cursor over the changed keys
  for (uint64_t i = 0; i < c.removed; ++i) {
    uint64_t key = in.get<uint64_t>();
    if ((i > 0 && key <= out.removed.back()) || !slots.contains_key(key))
      return damage(table_errc::malformed, "delta: removed key " + std::to_string(key) +
                                               " is out of order or outside the shard's slots");
    while (j < out.keys.size() && out.keys[j] < key) ++j;
    if (j < out.keys.size() && out.keys[j] == key)
      return damage(table_errc::duplicate_key, "delta: key " + std::to_string(key) + " both changed and removed");
    out.removed.push_back(key);
  }
  for (size_t j = 1; j < out.counts.size(); ++j)
    if (out.counts[out.by_rank[j]] < out.counts[out.by_rank[j - 1]])
      return damage(table_errc::count_mismatch, "delta: update count " + std::to_string(out.counts[out.by_rank[j]]) +
                                                    " at rank " + std::to_string(j) + " is below the one before it");
  return {};
}

// A delta in the table's order: whether a key comes twice, found as a row
// of the table twice (`at`) or as a new key twice.
table_error check_repeats(const std::vector<uint64_t>& keys, const std::vector<uint32_t>& at, uint32_t rows) {
  std::vector<bool> seen(rows);
  std::vector<uint64_t> fresh;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (at[i] == table_codec::no_row) {
      fresh.push_back(keys[i]);
    } else if (seen[at[i]]) {
      return damage(table_errc::duplicate_key, "delta: key " + std::to_string(keys[i]) + " twice");
    } else {
      seen[at[i]] = true;
    }
  }
  std::sort(fresh.begin(), fresh.end());
  if (auto twice = std::adjacent_find(fresh.begin(), fresh.end()); twice != fresh.end())
    return damage(table_errc::duplicate_key, "delta: key " + std::to_string(*twice) + " twice");
  return {};
}

// Writes the changed rows, `at` their places (no_row: new): with a capacity
// in rank order, each becoming the most recently updated (with LFU: of its
// count; all leave their tiers first, so that each goes to its tier's tail
// in rank order: ascending counts, one pass over the tiers), else in key
// order. Rows are scattered in memory: each is asked for a few writes ahead.
void write_rows(embedding_table& t, const header& h, const delta_body& body, const std::vector<uint32_t>& at) {
  const bool lfu = has_counts(h), ranked = h.capacity_rows > 0;
  const size_t count = body.keys.size();
  if (lfu)
    for (size_t i = 0; i < count; ++i)
      if (at[i] != table_codec::no_row)
        table_codec::detach(t, at[i]);
  auto nth = [&](size_t j) -> size_t { return ranked ? body.by_rank[j] : j; };
  std::vector<float> row(size_t{h.dim} * (1 + h.state_slots));
  uint32_t cursor = table_codec::no_row;
  for (size_t j = 0; j < count; ++j) {
    if (j + rows_ahead < count && at[nth(j + rows_ahead)] != table_codec::no_row)
      table_codec::prefetch(t, at[nth(j + rows_ahead)]);
    const size_t i = nth(j);
    std::memcpy(row.data(), body.values[i], row.size() * sizeof(float));
    const uint32_t r = table_codec::put_row_at(t, at[i], body.keys[i], row.data());
    if (lfu)
      table_codec::place_at_count(t, r, body.counts[i], cursor);
  }
}

}  // namespace

table_result<table_delta_counts> table_delta_counts_of(const unsigned char* data, size_t n) {
  header h;
  table_delta_counts c;
  if (auto e = read_delta_header(data, n, h, c))
    return e;
  return c;
}

table_error apply_table_delta(embedding_table& t, const unsigned char* data, size_t n, table_crc crc) {
  header h;
  table_delta_counts c;
  if (auto e = read_delta_header(data, n, h, c))
    return e;
  if (crc == table_crc::check) {
    uint32_t stored;
    std::memcpy(&stored, data + n - 4, 4);
    if (uint32_t actual = crc32c(data, n - 4); stored != actual)
      return damage(table_errc::crc_mismatch, "delta: CRC32C " + std::to_string(actual) + " of its bytes, " +
                                                  std::to_string(stored) + " stored");
  }
  reader in{data + table_delta_header_bytes};
  std::string name(reinterpret_cast<const char*>(in.at), h.name_bytes);
  in.at += h.name_bytes;
  std::vector<uint64_t> bitmap((uint64_t{h.slot_count} + 63) / 64);
  for (auto& w : bitmap) w = in.get<uint64_t>();
  if (auto e = check_shape(h, name, bitmap, t))
    return e;
  delta_body body;
  if (auto e = check_rows(in, h, c, t, body))
    return e;
  // The row count the delta leads to, known before anything changes; the
  // changed rows' places found on the way (lookups ahead asked for early).
  const auto& keys = body.keys;
  std::vector<uint32_t> at(keys.size());
  uint64_t after = table_codec::rows(t);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i % table_codec::prefetch_chunk == 0)
      table_codec::prefetch_keys(t, keys.data() + i, std::min(table_codec::prefetch_chunk, keys.size() - i));
    at[i] = table_codec::find(t, keys[i]);
    after += at[i] == table_codec::no_row;
  }
  for (uint64_t key : body.removed) after -= table_codec::find(t, key) != table_codec::no_row;
  if (in_arena_order(h))  // keys in the rows' order, not ascending: repeats are looked for here
    if (auto e = check_repeats(keys, at, table_codec::rows(t)))
      return e;
  if (after != h.rows)
    return damage(table_errc::count_mismatch, "delta: the table would have " + std::to_string(after) +
                                                  " rows once it is applied, the delta says " + std::to_string(h.rows) +
                                                  " (a delta of another parent?)");
  // Checked: now applied.
  table_codec::reserve(t, h.rows);  // bounded: the count checked above
  bool moved = false;  // a removal moves the last row into the hole
  for (uint64_t key : body.removed)
    if (uint32_t r = table_codec::find(t, key); r != table_codec::no_row) {
      table_codec::remove_row(t, r);
      moved = true;
    }
  if (moved)
    for (size_t i = 0; i < keys.size(); ++i) at[i] = table_codec::find(t, keys[i]);
  write_rows(t, h, body, at);
  if (h.min_pushes > 1) {
    auto& counters = table_codec::sketch(t).counters();
    std::memcpy(counters.data(), in.at, counters.size() * sizeof(uint16_t));
  }
  auto& stats = table_codec::stats(t);
  stats.evictions = h.evictions;
  stats.admissions_refused = h.admissions_refused;
  stats.full_refused = h.full_refused;
  return {};
}

table_error apply_table_delta(embedding_table& t, const std::vector<byte_view>& parts, table_crc crc) {
  if (parts.size() == 1)
    return apply_table_delta(t, parts[0].data, parts[0].size, crc);
  size_t n = 0;
  for (const auto& p : parts) n += p.size;
  std::vector<unsigned char> whole(n);
  parts_reader(parts).copy(whole.data(), n);
  return apply_table_delta(t, whole.data(), n, crc);
}

}  // namespace keel
