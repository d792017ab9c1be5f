#include "actors/core/shard_snapshot.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <kj/exception.h>

#include "actors/core/shard_snapshot_parts.hpp"
#include "actors/core/table_snapshot.hpp"
#include "actors/core/tensor_recycler.hpp"
#include "actors/core/update_rules.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"
#include "storage/crc32c.hpp"
#include "storage/snapshot.hpp"

namespace keel {

using namespace snapshot_parts;

namespace {

// Frames whose CRCs are known good (see check_shard_snapshot(cfg, frame)).
// Weak references: the memo keeps no frame alive, and an expired entry
// still names its own control block, so a new frame at a reused address is
// never mistaken for it. Bounded: the oldest entries go first.
class verified_frames {
 public:
  static verified_frames& instance() {
    static verified_frames v;
    return v;
  }

  void add(const frame_ptr& f) {
    std::lock_guard<std::mutex> lock(mtx_);
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [](auto& w) { return w.expired(); }),
                   entries_.end());
    if (entries_.size() >= max_entries)
      entries_.erase(entries_.begin());
    entries_.push_back(f);
  }

  bool contains(const frame_ptr& f) const {
    std::lock_guard<std::mutex> lock(mtx_);
    return std::any_of(entries_.begin(), entries_.end(),
                       [&](auto& w) { return !w.owner_before(f) && !f.owner_before(w); });
  }

 private:
  static constexpr size_t max_entries = 1024;
  mutable std::mutex mtx_;
  std::vector<std::weak_ptr<const frame>> entries_;
};

}  // namespace

std::shared_ptr<buffer_pool> snapshot_pool() {
  // One idle buffer is what a shard's next snapshot needs: it is given back
  // when the oldest snapshot kept for restarts is dropped, before the next
  // one is taken.
  return buffer_pool::create(SIZE_MAX, 1);
}

namespace snapshot_parts {

common_parts common_of(const shard_core& core, uint64_t checkpoint, int64_t created_unix_ms,
                       const run_identity& run) {
  const auto& cfg = core.config();
  common_parts p;
  snapshot_header& h = p.header;
  h.shard = cfg.shard;
  h.checkpoint = checkpoint;
  h.step = core.progress_clock();
  h.shard_version = core.version();
  h.created_unix_ms = created_unix_ms;
  h.run_id = run.run_id;
  h.config_hash = run.config_hash;
  for (uint32_t w = 0; w < cfg.num_workers; ++w) {
    h.applied.push_back({w, core.applied(w)});
    p.clocks.push_back(core.worker_clock(w));
  }
  p.keys.reserve(core.sparse().size());
  for (auto& [k, e] : core.sparse())
    p.keys.push_back(k);
  std::sort(p.keys.begin(), p.keys.end());  // snapshots list sparse keys in order
  p.entries.reserve(p.keys.size() * 3);
  for (auto k : p.keys) {
    auto& e = core.sparse().at(k);
    p.entries.insert(p.entries.end(), {e.value, e.slot1, e.slot2});
  }
  p.counters = {core.version(), core.bsp_clock(), core.optimizer_steps()};
  return p;
}

void common_parts::add_to(std::vector<tensor_view>& tensors) const {
  tensors.push_back(i64(t_sparse_keys, keys));
  tensors.push_back(f32(t_sparse_entries, entries, {keys.size(), 3}));
  tensors.push_back(i64(t_worker_clock, clocks));
  tensors.push_back(i64(t_counters, counters));
}

}  // namespace snapshot_parts

caf::expected<shard_snapshot_msg> snapshot_of(const shard_core& core, uint64_t checkpoint,
                                              int64_t created_unix_ms, const run_identity& run,
                                              bool table_rows, std::shared_ptr<buffer_pool> pool) {
  auto snap = built_in_memory(
    [&](const snapshot_sink& sink) { return full_parts(core, checkpoint, created_unix_ms, run, table_rows, sink); },
    std::move(pool));
  if (!snap)
    return snap;
  verified_frames::instance().add(snap->frame());
  return snap;
}

namespace snapshot_parts {

caf::expected<shard_snapshot_msg> built_in_memory(const std::function<caf::error(const snapshot_sink&)>& parts,
                                                  std::shared_ptr<buffer_pool> pool) {
  std::optional<shard_snapshot_msg> snap;
  auto made = parts([&](const snapshot_header& h, const std::vector<tensor_view>& tensors,
                        const std::vector<tensor_writer>& tables) -> caf::error {
    auto m = make_snapshot(h, tensors, tables, default_chunk_bytes, std::move(pool));
    if (!m)
      return std::move(m.error());
    snap = std::move(*m);
    return {};
  });
  if (made)
    return made;
  return std::move(*snap);
}

caf::error full_parts(const shard_core& core, uint64_t checkpoint, int64_t created_unix_ms, const run_identity& run,
                      bool table_rows, const snapshot_sink& sink) {
  const auto& cfg = core.config();
  auto parts = common_of(core, checkpoint, created_unix_ms, run);
  std::vector<tensor_view> tensors = {f32(t_dense, core.dense(), {core.dense().size()})};
  auto slots = dense_slots(cfg);
  if (slots >= 1)
    tensors.push_back(f32(t_slot1, core.dense_slot(0), {core.dense().size()}));
  if (slots >= 2)
    tensors.push_back(f32(t_slot2, core.dense_slot(1), {core.dense().size()}));
  parts.add_to(tensors);
  std::vector<unsigned char> digests;
  std::vector<uint64_t> table_counts;  // the read-out's table_counters, table by table
  if (!table_rows && !core.tables().empty()) {
    for (auto& table : core.tables()) {
      auto c = table.counters();
      table_counts.insert(table_counts.end(), {c.rows, c.evictions, c.admissions_refused, c.full_refused, c.bytes});
    }
    tensors.push_back(i64(table_counters_tensor, table_counts));
    for (auto& table : core.tables()) {
      auto digest = content_sha256(table);
      digests.insert(digests.end(), digest.begin(), digest.end());
    }
    tensors.push_back({table_digests_tensor, schema::DType::UINT8, {digests.size()}, digests.data(), digests.size()});
  }
  // Tables are encoded straight into their chunks: one pass, no copy.
  std::vector<tensor_writer> tables;
  for (auto& table : core.tables()) {
    if (!table_rows)
      break;
    auto bytes = encoded_table_bytes(table);
    tables.push_back({t_table_prefix + table.name(), schema::DType::UINT8, {bytes}, bytes,
                      [&table](span_source& chunks) { return encode_table_into(table, chunks); }});
  }
  return sink(parts.header, tensors, tables);
}


caf::error for_each_table(const shard_config& cfg, schema::ShardSnapshot::Reader snap, const std::string& where,
                          const std::function<caf::error(uint32_t, const std::vector<byte_view>&)>& each) {
  for (auto t : snap.getTensors()) {
    std::string name = t.getName().cStr();
    if (name.compare(0, t_table_prefix.size(), t_table_prefix) != 0)
      continue;
    auto known = std::any_of(cfg.tables.begin(), cfg.tables.end(),
                             [&](const table_spec& ts) { return t_table_prefix + ts.name == name; });
    if (!known)
      return make_error(errc::shape_mismatch, where + ": tensor '" + name + "' is a table this job's layout lacks");
  }
  for (uint32_t i = 0; i < cfg.tables.size(); ++i) {
    auto name = t_table_prefix + cfg.tables[i].name;
    uint64_t size = 0;  // what load checks the tensor against
    std::vector<byte_view> parts;  // its chunks, read where they lie
    for (auto t : snap.getTensors())
      if (t.getName() == name.c_str() && t.getShape().size() == 1) {
        size = t.getShape()[0];
        parts.clear();
        for (auto c : t.getChunks()) parts.push_back({c.begin(), c.size()});
      }
    if (auto err = load<unsigned char>(snap, name.c_str(), schema::DType::UINT8, {size}, nullptr))
      return err;
    if (auto err = each(i, parts))
      return err;
  }
  return {};
}

caf::error load_common(const shard_config& cfg, schema::ShardSnapshot::Reader snap, shard_core::state& s) {
  s.sparse.clear();
  std::vector<uint64_t> keys;
  std::vector<float> entries;
  for (auto t : snap.getTensors())
    if (t.getName() == t_sparse_keys && t.getShape().size() == 1)
      keys.resize(t.getShape()[0]);
  if (auto err = load(snap, t_sparse_keys, schema::DType::INT64, {keys.size()}, &keys))
    return err;
  if (auto err = load(snap, t_sparse_entries, schema::DType::FLOAT32, {keys.size(), 3}, &entries))
    return err;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!cfg.sparse.contains(keys[i]) || (i > 0 && keys[i] <= keys[i - 1]))
      return make_error(errc::damaged_snapshot, "snapshot of shard " + std::to_string(cfg.shard) +
                                                  ": sparse key " + std::to_string(keys[i]) +
                                                  " is out of order or not this shard's");
    s.sparse.emplace(keys[i], sparse_entry{entries[3 * i], entries[3 * i + 1], entries[3 * i + 2]});
  }
  if (auto err = load(snap, t_worker_clock, schema::DType::INT64, {cfg.num_workers}, &s.worker_clock))
    return err;
  std::vector<uint64_t> counters;
  if (auto err = load(snap, t_counters, schema::DType::INT64, {3}, &counters))
    return err;
  s.version = counters[0];
  s.bsp_clock = counters[1];
  s.optimizer_steps = counters[2];
  s.applied.assign(cfg.num_workers, 0);
  auto applied = snap.getApplied();
  for (auto a : applied) {
    if (a.getWorker() >= cfg.num_workers)
      return make_error(errc::shape_mismatch, "snapshot of shard " + std::to_string(cfg.shard) +
                                                " records worker " + std::to_string(a.getWorker()) +
                                                ", but the job has " +
                                                std::to_string(cfg.num_workers) + " workers");
    s.applied[a.getWorker()] = a.getSeq();
  }
  return {};
}

}  // namespace snapshot_parts

namespace {

// CRC32Cs of some tensors computed on a thread of their own. The chunks are
// gathered on the caller's thread first (a capnp reader's traversal limit
// is not for two threads); the thread reads only raw bytes. Joined by
// finish() or, on an early return, by the destructor.
class background_crcs {
 public:
  void start(schema::ShardSnapshot::Reader snap, const std::vector<std::string>& names) {
    for (auto t : snap.getTensors()) {
      if (std::find(names.begin(), names.end(), t.getName().cStr()) == names.end())
        continue;
      tensors_.push_back(t);
      pieces_.emplace_back();
      for (auto c : t.getChunks()) pieces_.back().push_back(c);
    }
    crcs_.assign(tensors_.size(), crc32c_empty);
    worker_ = std::thread([this] {
      for (size_t i = 0; i < pieces_.size(); ++i)
        for (auto& c : pieces_[i]) crcs_[i] = crc32c_extend(crcs_[i], c.begin(), c.size());
    });
  }

  caf::error finish() {
    if (!worker_.joinable())
      return {};
    worker_.join();
    for (size_t i = 0; i < tensors_.size(); ++i)
      if (auto err = check_tensor_crc(tensors_[i], crcs_[i]))
        return err;
    return {};
  }

  ~background_crcs() {
    if (worker_.joinable())
      worker_.join();
  }

 private:
  std::vector<schema::Tensor::Reader> tensors_;
  std::vector<std::vector<capnp::Data::Reader>> pieces_;
  std::vector<uint32_t> crcs_;
  std::thread worker_;
};

// The snapshot's tables, decoded and checked against `cfg` (name, d, dtype,
// optimizer, slots, counts, CRC: decode_table's checks). A table tensor the
// layout does not have is another layout: refused. Without `rows` (a check
// only) rows start from zeros, which no check depends on.
caf::error load_tables(const shard_config& cfg, schema::ShardSnapshot::Reader snap,
                       const table_row_source& rows, std::vector<embedding_table>& out) {
  auto where = "snapshot of shard " + std::to_string(cfg.shard);
  return for_each_table(cfg, snap, where, [&](uint32_t i, const std::vector<byte_view>& parts) -> caf::error {
    table_row_source from = rows ? rows : [](uint32_t, uint64_t, float* v, uint32_t d) { std::fill(v, v + d, 0.0f); };
    auto init = [from, i](uint64_t key, float* v, uint32_t d) { from(i, key, v, d); };
    // Its bytes' CRC was checked with the snapshot's (verify_mode: the
    // tensor's CRC, or the file's payload CRC, before any of this).
    auto table = decode_table(parts, shard_table_config(cfg, i), init, table_crc::covered);
    if (!table)
      return make_error(is_damage(table.error().code) ? errc::damaged_snapshot : errc::shape_mismatch,
                        where + ": " + describe(table.error()));
    out.push_back(std::move(*table));
    return {};
  });
}

}  // namespace

namespace snapshot_parts {

caf::error load_state(const shard_config& cfg, schema::ShardSnapshot::Reader snap, bool restore,
                      verify_mode mode, const table_row_source& rows, shard_core::state& s) {
  if (snap.getShard() != cfg.shard)
    return make_error(errc::invalid_argument, "snapshot is of shard " + std::to_string(snap.getShard()) +
                                                ", not shard " + std::to_string(cfg.shard));
  if (snap.getParentFile().size() > 0)
    return make_error(errc::invalid_argument,
                      "snapshot of shard " + std::to_string(cfg.shard) + " checkpoint " +
                        std::to_string(snap.getCheckpoint()) + " is a delta on " + snap.getParentFile().cStr() +
                        ": only its chain restores the shard");
  // A restore checks the CRCs of the dense tensors on a second thread
  // while it copies them (each pass alone takes about as long as the
  // other); every other tensor and section is checked first.
  auto slots = dense_slots(cfg);
  background_crcs dense_crcs;
  if (mode == verify_mode::checksums) {
    std::vector<std::string> checked_aside;
    if (restore) {
      checked_aside = {t_dense};
      if (slots >= 1)
        checked_aside.push_back(t_slot1);
      if (slots >= 2)
        checked_aside.push_back(t_slot2);
      dense_crcs.start(snap, checked_aside);
    }
    if (auto err = verify_checksums(snap, checked_aside))
      return err;
  }
  uint64_t n = cfg.dense.size();
  if (auto err = load(snap, t_dense, schema::DType::FLOAT32, {n}, restore ? &s.dense : nullptr))
    return err;
  if (slots >= 1)
    if (auto err = load(snap, t_slot1, schema::DType::FLOAT32, {n}, restore ? &s.slot1 : nullptr))
      return err;
  if (slots >= 2)
    if (auto err = load(snap, t_slot2, schema::DType::FLOAT32, {n}, restore ? &s.slot2 : nullptr))
      return err;
  if (auto err = dense_crcs.finish())
    return err;
  if (auto err = load_common(cfg, snap, s))
    return err;
  if (restore && !cfg.tables.empty() && !rows)
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.shard) +
                                                ": restoring tables needs the model's initial rows");
  return load_tables(cfg, snap, rows, s.tables);
}

}  // namespace snapshot_parts

namespace {

// Checks everything restore_shard checks; with `restore`, also builds the
// shard (the dense tensors are copied only then).
caf::expected<shard_core> restore_unguarded(const shard_config& cfg, schema::ShardSnapshot::Reader snap,
                                            bool restore, verify_mode mode, const table_row_source& rows) {
  shard_core::state s;
  if (auto err = load_state(cfg, snap, restore, mode, rows, s))
    return err;
  if (!restore)
    return shard_core{};
  return shard_core::restored(cfg, std::move(s), rows);
}

}  // namespace

caf::expected<shard_core> restore_shard(const shard_config& cfg, schema::ShardSnapshot::Reader snap,
                                        verify_mode mode, const table_row_source& rows) {
  // A validated snapshot can still be hostile: chunk pointers that share one
  // blob make every walk over a tensor read it many times, and the reader's
  // traversal limit throws part-way through a copy (see
  // tests/fuzz/regressions/fuzz_snapshot_file). Refuse it as damage, as a
  // value, so the caller can fall back to an older snapshot.
  try {
    return restore_unguarded(cfg, snap, true, mode, rows);
  } catch (const kj::Exception& e) {
    return make_error(errc::damaged_snapshot, "snapshot of shard " + std::to_string(cfg.shard) +
                                                " is unreadable: " + e.getDescription().cStr());
  }
}

caf::error check_shard_snapshot(const shard_config& cfg, schema::ShardSnapshot::Reader snap) {
  try {
    auto checked = restore_unguarded(cfg, snap, false, verify_mode::checksums, {});
    return checked ? caf::error{} : checked.error();
  } catch (const kj::Exception& e) {
    return make_error(errc::damaged_snapshot, "snapshot of shard " + std::to_string(cfg.shard) +
                                                " is unreadable: " + e.getDescription().cStr());
  }
}

caf::error check_shard_snapshot(const shard_config& cfg, const frame_ptr& snap) {
  if (!snap)
    return make_error(errc::damaged_snapshot, "snapshot of shard " + std::to_string(cfg.shard) + " is empty");
  auto d = decode<schema::ShardSnapshot>(snap);
  if (!d)
    return d.error();
  auto& memo = verified_frames::instance();
  bool known_good = memo.contains(snap);
  try {
    auto checked =
      restore_unguarded(cfg, d->root(), false, known_good ? verify_mode::structure : verify_mode::checksums, {});
    if (!checked)
      return checked.error();
  } catch (const kj::Exception& e) {
    return make_error(errc::damaged_snapshot, "snapshot of shard " + std::to_string(cfg.shard) +
                                                " is unreadable: " + e.getDescription().cStr());
  }
  if (!known_good)
    memo.add(snap);
  return caf::error{};
}

}  // namespace keel
