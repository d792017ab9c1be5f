#include "actors/core/shard_stream.hpp"

#include <algorithm>

#include "actors/core/shard_snapshot_parts.hpp"
#include "actors/core/table_snapshot.hpp"
#include "actors/core/update_rules.hpp"

namespace keel {

using namespace snapshot_parts;

namespace {

// Chunks of 4 MiB, larger for a snapshot of more than 1 GiB so that the
// file keeps to 256 chunk segments (a capnp message has at most 512).
size_t stream_chunk_bytes(const std::vector<tensor_writer>& written) {
  uint64_t total = 0;
  for (auto& w : written) total += w.bytes;
  constexpr uint64_t mib = uint64_t{1} << 20;
  const uint64_t per_chunk = (total / 256 + mib - 1) / mib * mib;
  return static_cast<size_t>(std::clamp<uint64_t>(per_chunk, default_chunk_bytes, uint64_t{256} * mib));
}

}  // namespace

caf::expected<streamed_snapshot> stream_snapshot_of(const shard_core& core, file_io& io,
                                                    const std::filesystem::path& dir, const std::string& name,
                                                    const std::string& tmp_tag, uint64_t checkpoint,
                                                    int64_t created_unix_ms, const run_identity& run,
                                                    const std::optional<delta_parent>& parent) {
  std::optional<streamed_snapshot> out;
  auto sink = [&](const snapshot_header& h, const std::vector<tensor_view>& tensors,
                  const std::vector<tensor_writer>& tables) -> caf::error {
    auto s = stream_snapshot(io, dir, name, tmp_tag, h, tensors, tables, stream_chunk_bytes(tables));
    if (!s)
      return std::move(s.error());
    out = std::move(*s);
    return {};
  };
  auto err = parent ? delta_parts(core, checkpoint, created_unix_ms, run, *parent, sink)
                    : full_parts(core, checkpoint, created_unix_ms, run, true, sink);
  if (err)
    return err;
  return std::move(*out);
}

uint64_t snapshot_bytes_estimate(const shard_core& core, bool delta) {
  if (delta)
    return core.delta_bytes_estimate();
  uint64_t bytes = core.dense().size() * sizeof(float) * (1 + dense_slots(core.config()));
  bytes += core.sparse().size() * (sizeof(uint64_t) + 3 * sizeof(float));
  for (auto& t : core.tables()) bytes += encoded_table_bytes(t);
  return bytes;
}

}  // namespace keel
