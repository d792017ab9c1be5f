#pragma once
// The pieces full and incremental shard snapshots share (shard_snapshot.cpp,
// shard_delta.cpp): the tensors' names, finding and copying a tensor with
// its dtype and shape checked, and the parts every snapshot holds whole (the
// header, the legacy sparse scalars, the workers' clocks and the counters).
// Not an interface of its own: shard_snapshot.hpp and shard_delta.hpp are.

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "actors/core/shard_core.hpp"
#include "actors/core/shard_delta.hpp"
#include "actors/core/tensor_recycler.hpp"
#include "messages/errors.hpp"
#include "storage/checkpoint_files.hpp"
#include "storage/run_identity.hpp"
#include "storage/snapshot.hpp"

namespace keel::snapshot_parts {

// Names of the tensors a shard snapshot holds.
constexpr const char* t_dense = "dense";
constexpr const char* t_slot1 = "dense.slot1";
constexpr const char* t_slot2 = "dense.slot2";
constexpr const char* t_sparse_keys = "sparse.keys";
constexpr const char* t_sparse_entries = "sparse.entries";  // value, slot1, slot2 per key
constexpr const char* t_worker_clock = "workers.clock";
constexpr const char* t_counters = "counters";  // version, bsp clock, optimizer steps
// Table t is the uint8 tensor "table.<name>" holding encode_table's bytes
// (actors/core/table_snapshot.hpp), chunked like every tensor, so a table
// past capnp's 512 MiB Data limit still fits.
const std::string t_table_prefix = "table.";
// A delta's dense chunks that changed (actors/core/shard_delta.hpp).
constexpr const char* t_dense_chunks = "dense.chunks";

inline tensor_view f32(const char* name, const std::vector<float>& v, std::vector<uint64_t> shape) {
  return {name, schema::DType::FLOAT32, std::move(shape), v.data(), v.size() * 4};
}

inline tensor_view i64(const char* name, const std::vector<uint64_t>& v) {
  return {name, schema::DType::INT64, {v.size()}, v.data(), v.size() * 8};
}

// Finds tensor `name` and checks its dtype and shape against what `cfg`
// implies, then copies it into `out` (when given; else only checks it).
template <class T>
caf::error load(schema::ShardSnapshot::Reader snap, const char* name, schema::DType dtype,
                const std::vector<uint64_t>& shape, std::vector<T>* out) {
  for (auto t : snap.getTensors()) {
    if (t.getName() != name)
      continue;
    std::vector<uint64_t> got;
    for (auto d : t.getShape())
      got.push_back(d);
    if (t.getDtype() != dtype || got != shape)
      return make_error(errc::shape_mismatch,
                        "snapshot of shard " + std::to_string(snap.getShard()) + ": tensor '" + name +
                          "' is " + dtype_name(t.getDtype()) + shape_text(got) + ", expected " +
                          dtype_name(dtype) + shape_text(shape));
    uint64_t n = 1;
    for (auto d : shape)
      n *= d;
    // Each walk over the chunks counts against the reader's traversal limit
    // (messages/decode.hpp), so this one both sizes and classifies them.
    uint64_t bytes = 0;
    bool whole_values = true;
    for (auto c : t.getChunks()) {
      bytes += c.size();
      whole_values = whole_values && c.size() % sizeof(T) == 0;
    }
    if (bytes != n * sizeof(T))
      return make_error(errc::damaged_snapshot, "snapshot of shard " + std::to_string(snap.getShard()) +
                                                  ": tensor '" + name + "' holds " + std::to_string(bytes) +
                                                  " bytes for " + std::to_string(n) + " values");
    if (!out)
      return {};
    // One pass straight from the chunks (capnp Data is word-aligned), not a
    // zero-filled vector copied over afterwards.
    if (!whole_values) {
      out->resize(n);
      return copy_tensor(t, out->data(), n * sizeof(T));
    }
    // Into memory a stopped shard had faulted in, where there is some.
    if constexpr (std::is_same<T, float>::value)
      *out = tensor_recycler::take(n);
    else
      out->clear();
    out->reserve(n);
    for (auto c : t.getChunks()) {
      auto first = reinterpret_cast<const T*>(c.begin());
      out->insert(out->end(), first, first + c.size() / sizeof(T));
    }
    return {};
  }
  return make_error(errc::shape_mismatch, "snapshot of shard " + std::to_string(snap.getShard()) +
                                            ": tensor '" + name + "' is missing");
}


// What every snapshot of `core` holds whole: its header and the tensors
// "sparse.keys", "sparse.entries", "workers.clock" and "counters".
struct common_parts {
  snapshot_header header;
  std::vector<uint64_t> keys, clocks, counters;
  std::vector<float> entries;
  void add_to(std::vector<tensor_view>& tensors) const;
};
common_parts common_of(const shard_core& core, uint64_t checkpoint, int64_t created_unix_ms,
                       const run_identity& run);

// What a snapshot of a shard is made into: a message in memory
// (make_snapshot) or a file (stream_snapshot). Called once, with views of
// the shard's state that are valid during the call only.
using snapshot_sink = std::function<caf::error(const snapshot_header&, const std::vector<tensor_view>&,
                                               const std::vector<tensor_writer>&)>;

// The snapshot whose parts `parts` hands its sink, built in memory from `pool`.
caf::expected<shard_snapshot_msg> built_in_memory(const std::function<caf::error(const snapshot_sink&)>& parts,
                                                  std::shared_ptr<buffer_pool> pool);

// The parts of a full snapshot of `core` (snapshot_of's contract) handed to `sink`.
caf::error full_parts(const shard_core& core, uint64_t checkpoint, int64_t created_unix_ms, const run_identity& run,
                      bool table_rows, const snapshot_sink& sink);

// The parts of a delta of `core` on `parent` (delta_snapshot_of's contract).
caf::error delta_parts(const shard_core& core, uint64_t checkpoint, int64_t created_unix_ms, const run_identity& run,
                       const delta_parent& parent, const snapshot_sink& sink);

// Checks that every "table.<name>" tensor of `snap` is a table of `cfg`'s
// layout, then hands each layout table's bytes to `each` in layout order (a
// missing one is shape_mismatch): the chunks of its tensor, where they lie,
// checked to hold the tensor's length; `where` names the snapshot in errors.
caf::error for_each_table(const shard_config& cfg, schema::ShardSnapshot::Reader snap, const std::string& where,
                          const std::function<caf::error(uint32_t, const std::vector<byte_view>&)>& each);

// Reads those parts of `snap` into `s` (sparse scalars, clocks, counters,
// applied), checked against `cfg`.
caf::error load_common(const shard_config& cfg, schema::ShardSnapshot::Reader snap, shard_core::state& s);

// Reads a base snapshot's whole state into `s` with every check restore_shard
// makes (`restore` false: checks only, the dense tensors are not copied).
// Refuses a delta (invalid_argument: only its chain restores the shard).
caf::error load_state(const shard_config& cfg, schema::ShardSnapshot::Reader snap, bool restore,
                      verify_mode mode, const table_row_source& rows, shard_core::state& s);

}  // namespace keel::snapshot_parts
