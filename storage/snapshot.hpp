#pragma once
// A shard snapshot as a value: `make_snapshot` turns a shard's state (header
// fields, named tensors, opaque sections) into one ShardSnapshot message
// whose tensors are split into chunks of at most `chunk_bytes` and carry a
// CRC32C, as do the sections. `verify_checksums` recomputes every tensor and
// section CRC of a decoded snapshot and reports the first mismatch, naming
// the tensor. The functions are pure and thread-safe; tensor and section
// views must stay valid during the call only.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "messages/buffer_pool.hpp"
#include "messages/protocol.hpp"
#include "storage/byte_span.hpp"

namespace keel {

// The snapshot format this build writes (ShardSnapshot.formatVersion).
constexpr uint16_t snapshot_format_version = 1;
constexpr size_t default_chunk_bytes = size_t{4} << 20;

// A view of one tensor's bytes, little-endian, row-major.
struct tensor_view {
  std::string name;
  schema::DType dtype = schema::DType::FLOAT32;
  std::vector<uint64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// Writes a tensor's bytes straight into its chunks, which `chunks` hands out
// one at a time, in order: in the message (make_snapshot) or through one
// chunk's buffer into a file (stream_snapshot, storage/snapshot_stream.hpp).
// The chunks hold exactly the tensor's bytes between them; it must fill
// every one completely. Returns the CRC32C of all the bytes it wrote, in
// order: the tensor's stored CRC.
using tensor_fill = std::function<uint32_t(span_source& chunks)>;

// A tensor whose bytes a producer writes into the message itself, where a
// tensor_view's are copied: for one that would otherwise build them in a
// buffer of its own first (an embedding table's encoder). One pass over
// the bytes, no staging copy.
struct tensor_writer {
  std::string name;
  schema::DType dtype = schema::DType::UINT8;
  std::vector<uint64_t> shape;
  size_t bytes = 0;
  tensor_fill fill;
};

// A view of one opaque application section (worker state, optimizer config).
struct section_view {
  std::string name;
  const void* data = nullptr;
  size_t bytes = 0;
};

struct applied_seq {
  uint32_t worker = 0;
  uint64_t seq = 0;
};

// The snapshot's header fields. `created_unix_ms` is set by the caller (time
// is an injectable input, not read here).
struct snapshot_header {
  uint32_t shard = 0;
  uint64_t checkpoint = 0;
  uint64_t step = 0;
  uint64_t shard_version = 0;
  std::vector<applied_seq> applied;  // any order; stored sorted by worker
  int64_t created_unix_ms = 0;
  std::string run_id;       // the run that takes it (storage/run_identity.hpp); may be empty
  std::string config_hash;
  // Its place in a chain (schema ShardSnapshot): a delta names its parent,
  // the shard's previous snapshot file in the chain, and the chain's base
  // checkpoint. A base leaves parent_file empty and parent_checkpoint 0;
  // its base_checkpoint 0 means "this snapshot's own checkpoint" (stored as
  // `checkpoint`).
  std::string parent_file{};
  uint64_t parent_checkpoint = 0;
  uint64_t base_checkpoint = 0;
};

// Builds the snapshot in memory from `pool`. Fails with
// errc::invalid_argument when a tensor's bytes do not match its shape and
// dtype, a name is empty or repeated, or a worker appears twice in applied.
caf::expected<shard_snapshot_msg> make_snapshot(
  const snapshot_header& header, const std::vector<tensor_view>& tensors,
  const std::vector<section_view>& sections = {}, size_t chunk_bytes = default_chunk_bytes,
  std::shared_ptr<buffer_pool> pool = buffer_pool::process_default());

// The same with `written` tensors after `tensors`, in order: each one's
// fill runs once, during the call, and writes its bytes into the message.
// The same checks (a writer without a fill is invalid_argument).
caf::expected<shard_snapshot_msg> make_snapshot(const snapshot_header& header,
                                                const std::vector<tensor_view>& tensors,
                                                const std::vector<tensor_writer>& written,
                                                size_t chunk_bytes = default_chunk_bytes,
                                                std::shared_ptr<buffer_pool> pool = buffer_pool::process_default());

// Recomputes the CRC32C of every tensor and section; on a mismatch returns
// errc::damaged_snapshot "tensor 'w': CRC32C mismatch (...)". Never throws: a
// snapshot its reader's traversal limit stops is errc::damaged_snapshot too.
caf::error verify_checksums(schema::ShardSnapshot::Reader s);
// The same, skipping the tensors named in `except`: for a caller that
// checksums those itself while it copies them (a shard's restore), so their
// bytes are read from memory once.
caf::error verify_checksums(schema::ShardSnapshot::Reader s, const std::vector<std::string>& except);
// The mismatch error verify_checksums gives for tensor `t` when `computed`
// is not its stored CRC32C; no error when it is.
caf::error check_tensor_crc(schema::Tensor::Reader t, uint32_t computed);

// Bytes a tensor holds (the sum of its chunks).
uint64_t tensor_bytes(schema::Tensor::Reader t);

// Copies a tensor's bytes into `out`, which must hold exactly
// tensor_bytes(t) bytes (else errc::invalid_argument naming the tensor).
caf::error copy_tensor(schema::Tensor::Reader t, void* out, size_t out_bytes);

// A tensor's shape as a vector.
std::vector<uint64_t> shape_of(schema::Tensor::Reader t);

// "[4, 8]" and "float32": how errors and `keel inspect` print shapes and dtypes.
std::string shape_text(const std::vector<uint64_t>& shape);
std::string shape_text(capnp::List<uint64_t>::Reader shape);
const char* dtype_name(schema::DType t);

}  // namespace keel
