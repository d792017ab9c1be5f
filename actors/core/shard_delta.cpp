#include "actors/core/shard_delta.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include <kj/exception.h>

#include "actors/core/shard_snapshot_parts.hpp"
#include "actors/core/table_delta.hpp"
#include "actors/core/update_rules.hpp"
#include "messages/errors.hpp"
#include "storage/snapshot.hpp"

namespace keel {

using namespace snapshot_parts;

namespace {

// The values of the changed chunks of `all`, chunk after chunk.
std::vector<float> gather(const std::vector<float>& all, const std::vector<uint64_t>& chunks) {
  std::vector<float> out;
  for (uint64_t c : chunks) {
    auto b = c * shard_core::dense_chunk_floats;
    auto e = std::min<uint64_t>(all.size(), b + shard_core::dense_chunk_floats);
    out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(b), all.begin() + static_cast<std::ptrdiff_t>(e));
  }
  return out;
}

}  // namespace

namespace snapshot_parts {

caf::error delta_parts(const shard_core& core, uint64_t checkpoint, int64_t created_unix_ms, const run_identity& run,
                       const delta_parent& parent, const snapshot_sink& sink) {
  const auto& cfg = core.config();
  if (!core.changes_complete())
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.shard) +
                                                ": a table dropped its changes since the last snapshot; take a base");
  auto parts = common_of(core, checkpoint, created_unix_ms, run);
  parts.header.parent_file = parent.file;
  parts.header.parent_checkpoint = parent.checkpoint;
  parts.header.base_checkpoint = parent.base_checkpoint;
  std::vector<uint64_t> chunks;
  for (uint64_t c = 0; c < core.dense_chunks(); ++c)
    if (core.dense_chunk_changed(c))
      chunks.push_back(c);
  auto slots = dense_slots(cfg);
  std::vector<std::vector<float>> values = {gather(core.dense(), chunks)};
  for (size_t i = 0; i < slots; ++i) values.push_back(gather(core.dense_slot(i), chunks));
  const char* names[] = {t_dense, t_slot1, t_slot2};
  std::vector<tensor_view> tensors = {i64(t_dense_chunks, chunks)};
  for (size_t i = 0; i < values.size(); ++i) tensors.push_back(f32(names[i], values[i], {values[i].size()}));
  parts.add_to(tensors);
  std::vector<table_delta_plan> plans;
  plans.reserve(core.tables().size());
  std::vector<tensor_writer> tables;
  for (auto& table : core.tables()) {
    plans.push_back(plan_table_delta(table));
    auto& plan = plans.back();
    tables.push_back({t_table_prefix + table.name(), schema::DType::UINT8, {plan.bytes}, plan.bytes,
                      [&table, &plan](span_source& out) { return encode_table_delta_into(table, plan, out); }});
  }
  return sink(parts.header, tensors, tables);
}

}  // namespace snapshot_parts

caf::expected<shard_snapshot_msg> delta_snapshot_of(const shard_core& core, uint64_t checkpoint,
                                                    int64_t created_unix_ms, const run_identity& run,
                                                    const delta_parent& parent, std::shared_ptr<buffer_pool> pool) {
  return built_in_memory(
    [&](const snapshot_sink& sink) { return delta_parts(core, checkpoint, created_unix_ms, run, parent, sink); },
    std::move(pool));
}

namespace {

std::string where(const shard_config& cfg, schema::ShardSnapshot::Reader d) {
  return "delta of shard " + std::to_string(cfg.shard) + " checkpoint " + std::to_string(d.getCheckpoint());
}

// The changed chunks' values, written back where they belong.
caf::error apply_dense(const shard_config& cfg, schema::ShardSnapshot::Reader d, shard_core::state& s) {
  std::vector<uint64_t> chunks;
  for (auto t : d.getTensors())
    if (t.getName() == t_dense_chunks && t.getShape().size() == 1)
      chunks.resize(t.getShape()[0]);
  if (auto err = load(d, t_dense_chunks, schema::DType::INT64, {chunks.size()}, &chunks))
    return err;
  const uint64_t n = cfg.dense.size();
  const uint64_t count = (n + shard_core::dense_chunk_floats - 1) / shard_core::dense_chunk_floats;
  uint64_t values = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i] >= count || (i > 0 && chunks[i] <= chunks[i - 1]))
      return make_error(errc::damaged_snapshot, where(cfg, d) + ": dense chunk " + std::to_string(chunks[i]) +
                                                  " is out of order or beyond the shard's " + std::to_string(count));
    values += std::min<uint64_t>(n, (chunks[i] + 1) * shard_core::dense_chunk_floats) -
              chunks[i] * shard_core::dense_chunk_floats;
  }
  std::vector<float>* into[] = {&s.dense, &s.slot1, &s.slot2};
  const char* names[] = {t_dense, t_slot1, t_slot2};
  for (size_t k = 0; k < 1 + dense_slots(cfg); ++k) {
    std::vector<float> v;
    if (auto err = load(d, names[k], schema::DType::FLOAT32, {values}, &v))
      return err;
    size_t at = 0;
    for (uint64_t c : chunks) {
      auto b = c * shard_core::dense_chunk_floats;
      auto e = std::min<uint64_t>(n, b + shard_core::dense_chunk_floats);
      std::copy(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + (e - b)),
                into[k]->begin() + static_cast<std::ptrdiff_t>(b));
      at += e - b;
    }
  }
  return {};
}

caf::error apply_tables(const shard_config& cfg, schema::ShardSnapshot::Reader d, shard_core::state& s) {
  return for_each_table(cfg, d, where(cfg, d), [&](uint32_t i, const std::vector<byte_view>& parts) -> caf::error {
    // Its bytes' CRC was checked with the delta's (verify_mode, apply_delta).
    if (auto e = apply_table_delta(s.tables[i], parts, table_crc::covered))
      return make_error(is_damage(e.code) ? errc::damaged_snapshot : errc::shape_mismatch,
                        where(cfg, d) + ": " + describe(e));
    return {};
  });
}

caf::error apply_delta(const shard_config& cfg, schema::ShardSnapshot::Reader d, uint64_t parent,
                       verify_mode mode, shard_core::state& s) {
  if (d.getShard() != cfg.shard)
    return make_error(errc::damaged_snapshot, where(cfg, d) + ": the file holds shard " + std::to_string(d.getShard()));
  if (d.getParentFile().size() == 0 || d.getParentCheckpoint() != parent)
    return make_error(errc::damaged_snapshot, where(cfg, d) + ": not a delta on checkpoint " + std::to_string(parent) +
                                                (d.getParentFile().size() == 0
                                                   ? std::string(" (a base)")
                                                   : " (on " + std::to_string(d.getParentCheckpoint()) + ")"));
  if (mode == verify_mode::checksums)
    if (auto err = verify_checksums(d))
      return err;
  if (auto err = apply_dense(cfg, d, s))
    return err;
  if (auto err = load_common(cfg, d, s))
    return err;
  return apply_tables(cfg, d, s);
}

caf::error extend_unguarded(const shard_config& cfg, chain_state& s, size_t first, size_t links,
                            const chain_reader& read, verify_mode mode) {
  for (size_t i = first; i < links; ++i) {
    auto d = read(i);
    if (!d)
      return std::move(d.error());
    if (auto err = apply_delta(cfg, d->root(), s.checkpoint, mode, s.state))
      return err;
    s.checkpoint = d->root().getCheckpoint();
  }
  return {};
}

caf::expected<chain_state> restore_state_unguarded(const shard_config& cfg, size_t links, const chain_reader& read,
                                                   verify_mode mode, const table_row_source& rows) {
  if (links == 0)
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.shard) + ": an empty chain");
  if (!cfg.tables.empty() && !rows)
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.shard) +
                                                ": restoring tables needs the model's initial rows");
  chain_state s;
  {
    auto base = read(0);
    if (!base)
      return std::move(base.error());
    if (auto err = load_state(cfg, base->root(), true, mode, rows, s.state))
      return err;
    s.checkpoint = base->root().getCheckpoint();
  }
  if (auto err = extend_unguarded(cfg, s, 1, links, read, mode))
    return err;
  return s;
}

caf::error unreadable(const shard_config& cfg, const kj::Exception& e) {
  return make_error(errc::damaged_snapshot, "a snapshot in the chain of shard " + std::to_string(cfg.shard) +
                                              " is unreadable: " + e.getDescription().cStr());
}

}  // namespace

caf::expected<chain_state> restore_chain_state(const shard_config& cfg, size_t links, const chain_reader& read,
                                               verify_mode mode, const table_row_source& rows) {
  try {
    return restore_state_unguarded(cfg, links, read, mode, rows);
  } catch (const kj::Exception& e) {
    return unreadable(cfg, e);
  }
}

caf::error extend_chain_state(const shard_config& cfg, chain_state& s, size_t first, size_t links,
                              const chain_reader& read, verify_mode mode) {
  try {
    return extend_unguarded(cfg, s, first, links, read, mode);
  } catch (const kj::Exception& e) {
    return unreadable(cfg, e);
  }
}

caf::expected<shard_core> restore_chain(const shard_config& cfg, size_t links, const chain_reader& read,
                                        verify_mode mode, const table_row_source& rows) {
  auto s = restore_chain_state(cfg, links, read, mode, rows);
  if (!s)
    return std::move(s.error());
  return shard_core::restored(cfg, std::move(s->state), rows);
}

}  // namespace keel
