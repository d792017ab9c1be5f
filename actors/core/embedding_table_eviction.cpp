// The eviction half of embedding_table (actors/core/embedding_table.hpp):
// the LRU recency list, LFU's count tiers, and the choice of a victim.

#include "actors/core/embedding_table.hpp"

#include <algorithm>
#include <cstring>

namespace keel {

// ---- recency list ----

uint32_t embedding_table::link(uint32_t r, int which) const {
  uint32_t v;
  std::memcpy(&v, row_at(r) + 2 + which, sizeof v);
  return v;
}

void embedding_table::set_link(uint32_t r, int which, uint32_t to) {
  std::memcpy(row_at(r) + 2 + which, &to, sizeof to);
}

void embedding_table::link_tail(uint32_t r) {
  set_link(r, 0, tail_);
  set_link(r, 1, no_row);
  if (tail_ != no_row)
    set_link(tail_, 1, r);
  else
    head_ = r;
  tail_ = r;
}

void embedding_table::unlink(uint32_t r) {
  uint32_t p = link(r, 0), n = link(r, 1);
  if (p != no_row)
    set_link(p, 1, n);
  else
    head_ = n;
  if (n != no_row)
    set_link(n, 0, p);
  else
    tail_ = p;
}

// ---- LFU count tiers ----

uint32_t embedding_table::tier_of(uint32_t r) const {
  uint32_t v;
  std::memcpy(&v, row_at(r) + 4, sizeof v);
  return v;
}

void embedding_table::tier_append(uint32_t tier, uint32_t r) {
  count_tier& t = tiers_[tier];
  std::memcpy(row_at(r) + 4, &tier, sizeof tier);
  set_link(r, 0, t.tail);
  set_link(r, 1, no_row);
  if (t.tail != no_row)
    set_link(t.tail, 1, r);
  else
    t.head = r;
  t.tail = r;
}

void embedding_table::tier_remove(uint32_t r) {
  const uint32_t tier = tier_of(r);
  count_tier& t = tiers_[tier];
  uint32_t p = link(r, 0), n = link(r, 1);
  if (p != no_row)
    set_link(p, 1, n);
  else
    t.head = n;
  if (n != no_row)
    set_link(n, 0, p);
  else
    t.tail = p;
  if (t.head != no_row)
    return;
  if (t.prev != no_row)
    tiers_[t.prev].next = t.next;
  else
    first_tier_ = t.next;
  if (t.next != no_row)
    tiers_[t.next].prev = t.prev;
  if (victim_scan_ == tier)
    victim_scan_ = t.next;
  t.next = free_tier_;
  free_tier_ = tier;
}

uint32_t embedding_table::make_tier(uint32_t count, uint32_t after) {
  uint32_t tier = free_tier_;
  if (tier != no_row) {
    free_tier_ = tiers_[tier].next;
  } else {
    tier = static_cast<uint32_t>(tiers_.size());
    tiers_.emplace_back();
  }
  const uint32_t next = after == no_row ? first_tier_ : tiers_[after].next;
  tiers_[tier] = count_tier{count, no_row, no_row, after, next};
  if (after == no_row)
    first_tier_ = tier;
  else
    tiers_[after].next = tier;
  if (next != no_row)
    tiers_[next].prev = tier;
  return tier;
}

void embedding_table::count_update(uint32_t r) {
  const uint32_t tier = tier_of(r);
  const uint32_t count = tiers_[tier].count;
  if (count == UINT32_MAX) {
    // Saturated: it stays in its tier, as its most recent row (a tier with
    // another row after r does not empty when r leaves it).
    if (tiers_[tier].tail != r) {
      tier_remove(r);
      tier_append(tier, r);
    }
    return;
  }
  const uint32_t next = tiers_[tier].next;
  const uint32_t target =
      next != no_row && tiers_[next].count == count + 1 ? next : make_tier(count + 1, tier);
  tier_remove(r);  // may drop `tier`; `target` stays linked
  tier_append(target, r);
}

void embedding_table::place_at_count(uint32_t r, uint32_t count, uint32_t& cursor) {
  uint32_t next = cursor == no_row ? first_tier_ : tiers_[cursor].next;
  while (next != no_row && tiers_[next].count <= count) {
    cursor = next;
    next = tiers_[next].next;
  }
  if (cursor == no_row || tiers_[cursor].count != count)
    cursor = make_tier(count, cursor);
  tier_append(cursor, r);
}

bool embedding_table::in_push(uint64_t key, const uint64_t* keys) const {
  // seen_ is check_duplicates' set of the push's positions, by mix64(key).
  const size_t mask = seen_.size() - 1;
  const uint32_t bits = static_cast<uint32_t>(__builtin_ctzll(seen_.size()));
  for (size_t b = static_cast<size_t>(mix64(key) >> (64 - bits));; b = (b + 1) & mask) {
    if (seen_[b] == no_row)
      return false;
    if (keys[seen_[b]] == key)
      return true;
  }
}

uint32_t embedding_table::lfu_victim(const uint64_t* keys) {
  // Within a tier the push's rows follow every other row (they were
  // appended during it), so a tier whose head is the push's is wholly the
  // push's, and stays so for the rest of the push: the scan never goes back.
  while (victim_scan_ != no_row && in_push(key_at(tiers_[victim_scan_].head), keys))
    victim_scan_ = tiers_[victim_scan_].next;
  return victim_scan_ == no_row ? no_row : tiers_[victim_scan_].head;
}

// ---- making room ----

uint32_t embedding_table::make_room(uint64_t key, size_t rows_of_this_push, const uint64_t* keys) {
  const uint64_t capacity = std::min<uint64_t>(cfg_.capacity_rows, max_rows);
  uint32_t r;
  if (rows_ < capacity) {
    r = append_row(key);
  } else if (lfu()) {
    r = lfu_victim(keys);
    if (r == no_row)
      return no_row;
    tier_remove(r);
    r = evict(r, key);
  } else {
    // The head is the least recently updated row; it belongs to this push
    // only when every row does.
    if (rows_of_this_push >= rows_)
      return no_row;
    r = head_;
    unlink(r);
    r = evict(r, key);
  }
  init_row(r, key);
  return r;
}

uint32_t embedding_table::evict(uint32_t r, uint64_t key) {
  if (!changes_lost_)
    evicted_.push_back(key_at(r));
  if (evicted_.size() > std::max<size_t>(rows_, size_t{1} << 16)) {
    evicted_.clear();
    evicted_.shrink_to_fit();
    changes_lost_ = true;
  }
  index_erase(key_at(r));
  std::memcpy(row_at(r), &key, sizeof key);
  index_insert(key, r);
  ++stats_.evictions;
  return r;
}

// ---- read-outs ----

std::vector<uint64_t> embedding_table::keys_in_eviction_order() const {
  std::vector<uint64_t> keys;
  if (lfu()) {
    for (uint32_t t = first_tier_; t != no_row; t = tiers_[t].next)
      for (uint32_t r = tiers_[t].head; r != no_row; r = link(r, 1)) keys.push_back(key_at(r));
  } else if (cfg_.capacity_rows > 0) {
    for (uint32_t r = head_; r != no_row; r = link(r, 1)) keys.push_back(key_at(r));
  }
  return keys;
}

uint32_t embedding_table::update_count(uint64_t key) const {
  uint32_t r = lfu() ? find(key) : no_row;
  return r == no_row ? 0 : tiers_[tier_of(r)].count;
}

}  // namespace keel
