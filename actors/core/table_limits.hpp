#pragma once
// The bounds a job puts on each of its shards' embedding tables, the same for
// every table and shard: a capacity in rows with its eviction policy (least
// recently or least frequently updated first), and an admission filter
// (actors/core/embedding_table.hpp says what each does). They decide the
// result, so they are part of the run's configuration (public API:
// job_config::training.tables); a shard's spawn carries them
// (shard_config::limits).

#include <cstdint>

#include <caf/meta/type_name.hpp>

#include "actors/core/eviction_policy.hpp"

namespace keel {

struct table_limits {
  uint64_t capacity_rows = 0;  // rows each shard keeps of each table; 0: no bound
  uint32_t admit_after = 0;    // a key becomes a row at its N-th push; 0 or 1: at its first
  // Which row a full table evicts (with capacity_rows > 0; none without).
  eviction_policy eviction = eviction_policy::least_recently_updated;
};

// Largest admit_after (the admission sketch's counters saturate there).
constexpr uint32_t max_admit_after = 65535;

// The field order is the wire format.
template <class I>
typename I::result_type inspect(I& f, table_limits& x) {
  return f(caf::meta::type_name("keel.table_limits"), x.capacity_rows, x.admit_after, x.eviction);
}

}  // namespace keel
