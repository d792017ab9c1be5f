#pragma once
// Reading embedding rows out of a running job for an application that asks
// (job::rows, job::table); no part of a run needs either. Both run on the
// controller's thread as continuations, find each shard's current
// incarnation through the directory, and answer `done` once, with the rows
// or the first error (a shard not up or not answering, a reply that does not
// fit the request, a table the model does not have), naming the shard.
//  - read_rows: the rows of `keys` in the order asked (a key without a row
//    reads its initial value), one pull of table keys to each shard that
//    owns some of them, at clock 0 (served at once by every consistency
//    rule, as evaluation's pulls are). Holds only the rows asked for.
//  - read_table: every row of the table, keys ascending: each shard's
//    snapshot of its rows (as a checkpoint's, validated on decode), merged.
//    Holds the whole table in this process.

#include <cstdint>
#include <functional>
#include <vector>

#include <caf/expected.hpp>

#include "actors/job/job_controller.hpp"

namespace keel {

// Each shard's current incarnation, by shard index, or the first that is not up.
void lookup_shards(controller_actor* self, std::function<void(caf::expected<std::vector<caf::actor>>)> done);

void read_rows(controller_actor* self, uint32_t table, std::vector<uint64_t> keys,
               std::function<void(caf::expected<std::vector<float>>)> done);

void read_table(controller_actor* self, uint32_t table, std::function<void(caf::expected<job::table_now>)> done);

}  // namespace keel
