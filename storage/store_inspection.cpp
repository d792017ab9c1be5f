#include "storage/store_inspection.hpp"

#include <algorithm>
#include <set>

#include "messages/errors.hpp"
#include "storage/snapshot.hpp"
#include "storage/store_layout.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

snapshot_summary summarize(const stored_snapshot& snap, const manifest_entry& e) {
  auto r = snap.root();
  snapshot_summary out;
  out.shard = r.getShard();
  out.file = e.file;
  out.file_bytes = e.bytes;
  out.write_us = e.write_us;
  out.step = r.getStep();
  out.shard_version = r.getShardVersion();
  out.run_id = r.getRunId().cStr();
  out.workers = r.getApplied().size();
  for (auto t : r.getTensors())
    out.tensors.push_back({t.getName().cStr(), t.getDtype(), shape_of(t), tensor_bytes(t),
                           t.getChunks().size()});
  for (auto s : r.getSections())
    out.sections.emplace_back(s.getName().cStr(), s.getData().size());
  return out;
}

checkpoint_summary inspect_checkpoint(const fs::path& dir, uint64_t id, verify_mode mode,
                                      file_io& io, buffer_pool& pool) {
  checkpoint_summary out;
  out.checkpoint = id;
  out.manifest_file = manifest_name(id);
  auto m = read_manifest_file(io, dir / out.manifest_file, pool);
  if (!m) {
    out.damage.push_back({out.manifest_file, std::move(m.error())});
    return out;
  }
  if (m->checkpoint != id) {
    out.damage.push_back({out.manifest_file,
                          make_error(errc::damaged_snapshot,
                                     out.manifest_file + ": records checkpoint " +
                                       std::to_string(m->checkpoint))});
    return out;
  }
  out.step = m->step;
  out.created_unix_ms = m->created_unix_ms;
  out.run = m->run;
  // Every shard is looked at, so one report lists all damaged files.
  for (auto& e : m->shards) {
    auto snap = read_committed_snapshot(io, dir, out.manifest_file, *m, e, pool, mode);
    if (!snap) {
      out.damage.push_back({e.file, std::move(snap.error())});
      continue;
    }
    out.shards.push_back(summarize(*snap, e));
  }
  return out;
}

}  // namespace

size_t store_summary::damaged() const {
  return static_cast<size_t>(std::count_if(checkpoints.begin(), checkpoints.end(),
                                           [](const checkpoint_summary& c) { return !c.valid(); }));
}

caf::expected<store_summary> inspect_store(const fs::path& dir, verify_mode mode, file_io& io,
                                           buffer_pool& pool) {
  auto names = io.list(dir);
  if (!names)
    return std::move(names.error());
  std::sort(names->begin(), names->end());
  std::set<uint64_t> committed;
  for (auto& n : *names)
    if (auto f = parse_store_file_name(n); f && f->kind == store_file_kind::manifest)
      committed.insert(f->checkpoint);
  store_summary out;
  out.dir = dir;
  out.mode = mode;
  for (auto& n : *names) {
    auto f = parse_store_file_name(n);
    if (f && (f->kind == store_file_kind::temporary ||
              (f->kind == store_file_kind::snapshot && committed.count(f->checkpoint) == 0)))
      out.leftovers.push_back(n);
  }
  for (auto it = committed.rbegin(); it != committed.rend(); ++it)
    out.checkpoints.push_back(inspect_checkpoint(dir, *it, mode, io, pool));
  return out;
}

}  // namespace keel
