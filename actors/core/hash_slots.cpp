#include "actors/core/hash_slots.hpp"

#include <string>

namespace keel {

namespace {

size_t words_for(uint32_t slot_count) {
  return (static_cast<size_t>(slot_count) + 63) / 64;
}

}  // namespace

slot_set::slot_set(uint32_t slot_count)
    : slot_count_(slot_count),
      pow2_(slot_count != 0 && (slot_count & (slot_count - 1)) == 0),
      words_(words_for(slot_count), 0) {}

slot_set slot_set::all(uint32_t slot_count) {
  slot_set s(slot_count);
  for (uint32_t i = 0; i < slot_count; ++i) s.add(i);
  return s;
}

table_result<slot_set> slot_set::from_words(uint32_t slot_count, std::vector<uint64_t> words) {
  if (words.size() != words_for(slot_count))
    return table_error(table_errc::slots_mismatch,
                       std::to_string(words.size()) + " bitmap words for " +
                           std::to_string(slot_count) + " slots (expected " +
                           std::to_string(words_for(slot_count)) + ")");
  if (slot_count % 64 != 0 && (words.back() >> (slot_count % 64)) != 0)
    return table_error(table_errc::slots_mismatch,
                       "a slot at or past " + std::to_string(slot_count) + " is marked owned");
  slot_set s(slot_count);
  s.words_ = std::move(words);
  return s;
}

void slot_set::add(uint32_t slot) {
  if (slot < slot_count_)
    words_[slot / 64] |= uint64_t{1} << (slot % 64);
}

uint32_t slot_set::size() const {
  uint32_t n = 0;
  for (uint64_t w : words_) n += static_cast<uint32_t>(__builtin_popcountll(w));
  return n;
}

table_result<slot_map> slot_map::contiguous(uint32_t slot_count, uint32_t shards) {
  if (shards == 0 || shards > slot_count)
    return table_error(table_errc::invalid_config, "a slot map of " + std::to_string(slot_count) +
                                                       " slots over " + std::to_string(shards) +
                                                       " shards (need 0 < shards <= slots)");
  std::vector<uint32_t> owner(slot_count);
  for (uint32_t s = 0; s < shards; ++s) {
    uint64_t first = uint64_t{s} * slot_count / shards;
    uint64_t last = uint64_t{s + 1} * slot_count / shards;
    for (uint64_t i = first; i < last; ++i) owner[i] = s;
  }
  return slot_map(std::move(owner), shards);
}

table_result<slot_map> slot_map::from_owners(std::vector<uint32_t> owner_of_slot, uint32_t shards) {
  if (owner_of_slot.empty() || shards == 0)
    return table_error(table_errc::invalid_config,
                       "a slot map needs at least one slot and one shard");
  std::vector<uint32_t> owned(shards, 0);
  for (size_t i = 0; i < owner_of_slot.size(); ++i) {
    if (owner_of_slot[i] >= shards)
      return table_error(table_errc::invalid_config,
                         "slot " + std::to_string(i) + " is owned by shard " +
                             std::to_string(owner_of_slot[i]) + " of " + std::to_string(shards));
    ++owned[owner_of_slot[i]];
  }
  for (uint32_t s = 0; s < shards; ++s)
    if (owned[s] == 0)
      return table_error(table_errc::invalid_config,
                         "shard " + std::to_string(s) + " owns no slot");
  return slot_map(std::move(owner_of_slot), shards);
}

table_result<slot_map> slot_map::with_shard_added() const {
  const uint32_t slots = slot_count();
  const uint32_t n = shards_;
  if (n + 1 > slots)
    return table_error(table_errc::invalid_config, "cannot add shard " + std::to_string(n) +
                                                       " to " + std::to_string(slots) + " slots");
  std::vector<uint32_t> owner = owner_;
  std::vector<uint32_t> owned(n + 1, 0);
  for (uint32_t o : owner) ++owned[o];
  // The highest slot each shard still owns, scanned downward as it gives up
  // slots; each shard's cursor only moves down, so the whole is O(S + moves*n).
  std::vector<int64_t> cursor(n, static_cast<int64_t>(slots) - 1);
  const uint32_t target = slots / (n + 1);
  for (uint32_t moved = 0; moved < target; ++moved) {
    uint32_t donor = 0;
    for (uint32_t s = 1; s < n; ++s)
      if (owned[s] > owned[donor])
        donor = s;
    while (owner[static_cast<size_t>(cursor[donor])] != donor) --cursor[donor];
    owner[static_cast<size_t>(cursor[donor])] = n;
    --owned[donor];
    ++owned[n];
  }
  return slot_map(std::move(owner), n + 1);
}

slot_set slot_map::slots_of(uint32_t shard) const {
  slot_set s(slot_count());
  for (uint32_t i = 0; i < slot_count(); ++i)
    if (owner_[i] == shard)
      s.add(i);
  return s;
}

void split_by_shard(const slot_map& map, const uint64_t* keys, size_t n, shard_split& out) {
  const uint32_t shards = map.shard_count();
  out.shard_of.resize(n);
  out.keys.resize(n);
  out.position.resize(n);
  out.begin.assign(static_cast<size_t>(shards) + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    uint32_t s = map.shard_of(keys[i]);
    out.shard_of[i] = s;
    ++out.begin[s + 1];
  }
  for (uint32_t s = 0; s < shards; ++s) out.begin[s + 1] += out.begin[s];
  // Place each key at its shard's next free position; `begin` doubles as the
  // cursor and is shifted back afterwards (begin[s] ends where s+1 starts).
  for (size_t i = 0; i < n; ++i) {
    size_t at = out.begin[out.shard_of[i]]++;
    out.keys[at] = keys[i];
    out.position[at] = i;
  }
  for (uint32_t s = shards; s > 0; --s) out.begin[s] = out.begin[s - 1];
  out.begin[0] = 0;
}

}  // namespace keel
