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
  out.base_checkpoint = e.chain.empty() ? r.getCheckpoint() : e.chain.front().checkpoint;
  out.workers = r.getApplied().size();
  for (auto t : r.getTensors())
    out.tensors.push_back({t.getName().cStr(), t.getDtype(), shape_of(t), tensor_bytes(t),
                           t.getChunks().size()});
  for (auto s : r.getSections())
    out.sections.emplace_back(s.getName().cStr(), s.getData().size());
  return out;
}

// What inspecting the whole store carries from one checkpoint to the next:
// the files manifests name, and which chain files validated already (a
// base is named by every checkpoint of its chain: read it once). A damaged
// one is read again for each manifest, whose name its report gives.
struct sweep {
  std::set<std::string> named;
  bool unreadable = false;    // a manifest could not be read: it may name any file
  std::set<std::string> good;  // chain files by file and place in their chain
};

// Validates the files of `e`'s chain (not `e.file`), each once per sweep;
// every damaged one goes into `out.damage`.
std::vector<chain_file_summary> inspect_chain(const fs::path& dir, const checkpoint_manifest& m,
                                              const manifest_entry& e, verify_mode mode, file_io& io,
                                              buffer_pool& pool, sweep& seen, checkpoint_summary& out) {
  std::vector<chain_file_summary> chain;
  for (size_t i = 0; i < e.chain.size(); ++i) {
    auto& l = e.chain[i];
    // A link's validity depends on its record, its parent and its base.
    auto key = l.file + "|" + std::to_string(l.bytes) + "|" + std::to_string(l.crc32c) + "|" +
               (i > 0 ? e.chain[i - 1].file : std::string()) + "|" + e.chain[0].file + "|" + m.run.run_id + "|" +
               m.run.config_hash;
    bool damaged = false;
    if (seen.good.count(key) == 0) {
      auto read = read_committed_link(io, dir, out.manifest_file, m, e, i, pool, mode);
      if (read)
        seen.good.insert(key);
      else
        out.damage.push_back({l.file, std::move(read.error())});
      damaged = !read;
    }
    chain.push_back({l.checkpoint, l.file, l.bytes, damaged});
  }
  return chain;
}

checkpoint_summary inspect_checkpoint(const fs::path& dir, uint64_t id, verify_mode mode,
                                      file_io& io, buffer_pool& pool, sweep& seen) {
  checkpoint_summary out;
  out.checkpoint = id;
  out.manifest_file = manifest_name(id);
  auto m = read_manifest_file(io, dir / out.manifest_file, pool);
  if (!m) {
    seen.unreadable = true;
    out.damage.push_back({out.manifest_file, std::move(m.error())});
    return out;
  }
  if (m->checkpoint != id) {
    seen.unreadable = true;
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
    seen.named.insert(e.file);
    for (auto& l : e.chain)
      seen.named.insert(l.file);
    auto chain = inspect_chain(dir, *m, e, mode, io, pool, seen, out);
    auto snap = read_committed_snapshot(io, dir, out.manifest_file, *m, e, pool, mode);
    if (!snap) {
      out.damage.push_back({e.file, std::move(snap.error())});
      continue;
    }
    out.shards.push_back(summarize(*snap, e));
    out.shards.back().chain = std::move(chain);
  }
  if (out.shards.size() == m->shards.size()) {
    uint64_t largest_step = 0;
    for (auto& s : out.shards)
      largest_step = std::max(largest_step, s.step);
    if (auto err = check_manifest_step(*m, out.manifest_file, largest_step))
      out.damage.push_back({out.manifest_file, std::move(err)});
  }
  return out;
}

}  // namespace

uint64_t snapshot_summary::chain_bytes() const {
  uint64_t n = file_bytes;
  for (auto& l : chain)
    n += l.bytes;
  return n;
}

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
  sweep seen;
  for (auto it = committed.rbegin(); it != committed.rend(); ++it)
    out.checkpoints.push_back(inspect_checkpoint(dir, *it, mode, io, pool, seen));
  for (auto& n : *names) {
    auto f = parse_store_file_name(n);
    if (f && (f->kind == store_file_kind::temporary ||
              (f->kind == store_file_kind::snapshot && committed.count(f->checkpoint) == 0 &&
               seen.named.count(n) == 0 && !seen.unreadable)))
      out.leftovers.push_back(n);
  }
  return out;
}

}  // namespace keel
