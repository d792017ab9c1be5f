#include "storage/checkpoint_files.hpp"

#include <algorithm>

#include "messages/errors.hpp"
#include "storage/error_context.hpp"
#include "storage/sealed_file.hpp"
#include "storage/snapshot.hpp"
#include "storage/store_layout.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

// Snapshots hold large Data lists; the reader walks each pointer a few times
// (validation, CRC check, the caller), so allow more than decode's default.
decode_limits snapshot_limits() {
  decode_limits limits;
  limits.traversal_limit_factor = 16;
  return limits;
}

caf::error damaged(const fs::path& p, const caf::error& e) {
  return make_error(is(e, errc::unsupported_version) ? errc::unsupported_version
                                                     : errc::damaged_snapshot,
                    p.filename().string() + ": " + error_text(e));
}

}  // namespace

void set_entry(schema::ManifestEntry::Builder b, const manifest_entry& e) {
  b.setShard(e.shard);
  b.setFile(e.file);
  b.setBytes(e.bytes);
  b.setCrc32c(e.crc32c);
  b.setWriteMicros(e.write_us);
  b.setWriteCpuMicros(e.write_cpu_us);
  auto links = b.initChain(static_cast<unsigned>(e.chain.size()));
  for (unsigned i = 0; i < e.chain.size(); ++i) {
    links[i].setCheckpoint(e.chain[i].checkpoint);
    links[i].setFile(e.chain[i].file);
    links[i].setBytes(e.chain[i].bytes);
    links[i].setCrc32c(e.chain[i].crc32c);
  }
}

manifest_entry entry_of(schema::ManifestEntry::Reader r) {
  manifest_entry e{r.getShard(), r.getFile().cStr(), r.getBytes(), r.getCrc32c(), r.getWriteMicros(),
                   r.getWriteCpuMicros(), {}};
  for (auto l : r.getChain()) e.chain.push_back({l.getCheckpoint(), l.getFile().cStr(), l.getBytes(), l.getCrc32c()});
  return e;
}

caf::expected<stored_snapshot> read_snapshot_file(file_io& io, const fs::path& p,
                                                  buffer_pool& pool, verify_mode mode,
                                                  manifest_entry* as_recorded) {
  bool crcs = mode == verify_mode::checksums;
  auto contents = read_sealed(io, p, snapshot_file_magic, pool, crcs || mode == verify_mode::payload);
  if (!contents)
    return std::move(contents.error());
  auto snap = decode<schema::ShardSnapshot>(contents->message, snapshot_limits());
  if (!snap)
    return damaged(p, snap.error());
  if (crcs)
    if (auto err = verify_checksums(snap->root()))
      return damaged(p, err);
  if (as_recorded != nullptr)
    *as_recorded = manifest_entry{snap->root().getShard(), p.filename().string(),
                                  contents->summary.file_bytes, contents->summary.payload_crc32c, 0, 0, {}};
  return snap;
}

caf::expected<manifest_entry> write_snapshot_file(file_io& io, const fs::path& dir,
                                                  const shard_snapshot_msg& snapshot,
                                                  const std::string& tmp_tag,
                                                  const snapshot_namer& name_of) {
  auto d = decode(snapshot, snapshot_limits());
  if (!d)
    return in_context(d.error(), "refusing to write a snapshot: ");
  auto name = name_of(d->root());
  if (!name)
    return std::move(name.error());
  auto summary = write_sealed(io, dir, *name, snapshot_file_magic, *snapshot.frame(), tmp_tag);
  if (!summary)
    return std::move(summary.error());
  return manifest_entry{d->root().getShard(), *name, summary->file_bytes, summary->payload_crc32c, 0, 0, {}};
}

caf::expected<manifest_entry> write_snapshot_file(file_io& io, const fs::path& dir,
                                                  const std::string& name,
                                                  const shard_snapshot_msg& snapshot,
                                                  const std::string& tmp_tag) {
  auto d = decode(snapshot, snapshot_limits());
  if (!d)
    return in_context(d.error(), "refusing to write " + name + ": ");
  auto summary = write_sealed(io, dir, name, snapshot_file_magic, *snapshot.frame(), tmp_tag);
  if (!summary)
    return std::move(summary.error());
  return manifest_entry{d->root().getShard(), name, summary->file_bytes, summary->payload_crc32c, 0, 0, {}};
}

namespace {

// Checks that `snap`, found as `found` (its size and payload CRC), is the
// very file committed as (checkpoint, e.shard) of run (run_id, config_hash);
// `named_by` names who committed it, for the errors.
caf::error check_expected(const stored_snapshot& snap, const manifest_entry& found, const manifest_entry& e,
                          uint64_t checkpoint, const std::string& run_id, const std::string& config_hash,
                          const std::string& named_by) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::damaged_snapshot, e.file + ": " + why);
  };
  auto root = snap.root();
  if (found.bytes != e.bytes || found.crc32c != e.crc32c)
    return bad("is not the file " + named_by + " committed (" + std::to_string(found.bytes) +
               " bytes, payload CRC " + std::to_string(found.crc32c) + "; " + named_by + " says " +
               std::to_string(e.bytes) + " bytes, CRC " + std::to_string(e.crc32c) + ")");
  if (root.getCheckpoint() != checkpoint || root.getShard() != e.shard)
    return bad("holds checkpoint " + std::to_string(root.getCheckpoint()) + " shard " +
               std::to_string(root.getShard()) + ", " + named_by + " says " + std::to_string(checkpoint) +
               " shard " + std::to_string(e.shard));
  if (root.getRunId() != run_id || root.getConfigHash() != config_hash)
    return bad("is of run '" + std::string(root.getRunId().cStr()) + "' (configuration " +
               root.getConfigHash().cStr() + "), but " + named_by + " is of run '" + run_id +
               "' (configuration " + config_hash + ")");
  return {};
}

// Reads the file `e` names in `dir` and checks it (check_expected).
caf::expected<stored_snapshot> read_expected(file_io& io, const fs::path& dir, const manifest_entry& e,
                                             uint64_t checkpoint, const std::string& run_id,
                                             const std::string& config_hash, const std::string& named_by,
                                             buffer_pool& pool, verify_mode mode) {
  manifest_entry found;
  auto snap = read_snapshot_file(io, dir / e.file, pool, mode, &found);
  if (!snap) {
    if (is(snap.error(), errc::not_found))
      return make_error(errc::damaged_snapshot, e.file + ": missing, but " + named_by + " names it for shard " +
                                                  std::to_string(e.shard));
    return std::move(snap.error());
  }
  if (auto err = check_expected(*snap, found, e, checkpoint, run_id, config_hash, named_by))
    return err;
  return snap;
}

// The file `i` of `e`'s chain (chain[i], or `e.file` when i == chain.size())
// as a manifest entry: what read_expected checks it against.
manifest_entry link_entry(const manifest_entry& e, size_t i) {
  if (i == e.chain.size())
    return manifest_entry{e.shard, e.file, e.bytes, e.crc32c, 0, 0, {}};
  auto& l = e.chain[i];
  return manifest_entry{e.shard, l.file, l.bytes, l.crc32c, 0, 0, {}};
}

// Whether `root`, read as file `i` of `e`'s chain, names its place in it:
// file 0 is a base (no parent; its base is itself, or 0 in files of a keel
// from before chains), every later file a delta on the file before it, of
// the chain's base.
caf::error check_linkage(schema::ShardSnapshot::Reader root, const manifest_entry& e, size_t i) {
  auto file = i == e.chain.size() ? e.file : e.chain[i].file;
  auto bad = [&](const std::string& why) { return make_error(errc::damaged_snapshot, file + ": " + why); };
  std::string parent = root.getParentFile().cStr();
  auto checkpoint = root.getCheckpoint();
  auto base = root.getBaseCheckpoint();
  if (i == 0) {
    if (!parent.empty())
      return bad("a delta on " + parent + ", but the chain says it is a base" +
                 (e.chain.empty() ? " (the manifest records no chain for it)" : ""));
    if (base != checkpoint && base != 0)
      return bad("a base that names checkpoint " + std::to_string(base) + " as its base");
    return {};
  }
  auto& before = e.chain[i - 1];
  if (parent.empty())
    return bad("a base, but the chain says it is a delta on " + before.file);
  if (parent != before.file)
    return bad("a delta on " + parent + ", but the chain says " + before.file);
  if (root.getParentCheckpoint() != before.checkpoint)
    return bad("a delta on checkpoint " + std::to_string(root.getParentCheckpoint()) + ", but the chain says " +
               before.file + " of checkpoint " + std::to_string(before.checkpoint));
  if (base != e.chain[0].checkpoint)
    return bad("a delta of the chain based on checkpoint " + std::to_string(base) + ", but the chain's base is " +
               e.chain[0].file + " of checkpoint " + std::to_string(e.chain[0].checkpoint));
  return {};
}

caf::expected<stored_snapshot> read_link(file_io& io, const fs::path& dir, const manifest_entry& e, size_t i,
                                         uint64_t checkpoint, const std::string& run_id,
                                         const std::string& config_hash, const std::string& named_by,
                                         buffer_pool& pool, verify_mode mode) {
  if (i > e.chain.size())
    return make_error(errc::invalid_argument, e.file + ": its chain has " + std::to_string(e.chain.size() + 1) +
                                                " files, there is no file " + std::to_string(i));
  auto link_checkpoint = i == e.chain.size() ? checkpoint : e.chain[i].checkpoint;
  // A manifest names files of the store, by their store names: never a
  // path out of the directory, nor another shard's or checkpoint's file.
  auto& file = i < e.chain.size() ? e.chain[i].file : e.file;
  auto named = parse_store_file_name(file);
  if (!named || named->kind != store_file_kind::snapshot || named->shard != e.shard ||
      named->checkpoint != link_checkpoint)
    return make_error(errc::damaged_snapshot,
                      "'" + file + "': " + named_by + " names it as " +
                        (i < e.chain.size() ? "file " + std::to_string(i) + " of shard " + std::to_string(e.shard) +
                                                "'s chain"
                                            : "shard " + std::to_string(e.shard) + "'s file") +
                        ", of checkpoint " + std::to_string(link_checkpoint) +
                        ", but it is not a snapshot file of that shard and checkpoint");
  auto snap =
    read_expected(io, dir, link_entry(e, i), link_checkpoint, run_id, config_hash, named_by, pool, mode);
  if (!snap)
    return snap;
  if (auto err = check_linkage(snap->root(), e, i))
    return err;
  return snap;
}

}  // namespace

caf::expected<stored_snapshot> read_committed_snapshot(file_io& io, const fs::path& dir,
                                                       const std::string& manifest_file,
                                                       const checkpoint_manifest& m,
                                                       const manifest_entry& e, buffer_pool& pool,
                                                       verify_mode mode) {
  return read_link(io, dir, e, e.chain.size(), m.checkpoint, m.run.run_id, m.run.config_hash, manifest_file,
                   pool, mode);
}

caf::expected<stored_snapshot> read_committed_link(file_io& io, const fs::path& dir,
                                                   const std::string& manifest_file, const checkpoint_manifest& m,
                                                   const manifest_entry& e, size_t i, buffer_pool& pool,
                                                   verify_mode mode) {
  return read_link(io, dir, e, i, m.checkpoint, m.run.run_id, m.run.config_hash, manifest_file, pool, mode);
}

caf::expected<stored_snapshot> check_chain_link_copy(const snapshot_ref& ref, size_t i,
                                                     const shard_snapshot_msg& copy) {
  auto& e = ref.entry;
  if (i > e.chain.size())
    return make_error(errc::invalid_argument, e.file + ": its chain has " + std::to_string(e.chain.size() + 1) +
                                                " files, there is no file " + std::to_string(i));
  auto link = link_entry(e, i);
  auto in_memory = [&](const caf::error& err) {
    return make_error(errc::damaged_snapshot, error_text(err) + " (a copy in memory)");
  };
  if (copy.empty())
    return make_error(errc::damaged_snapshot, link.file + ": an empty copy in memory");
  auto summary = sealed_summary_of(*copy.frame());
  if (summary.file_bytes != link.bytes || summary.payload_crc32c != link.crc32c)
    return make_error(errc::damaged_snapshot,
                      link.file + ": a copy in memory of " + std::to_string(summary.file_bytes) +
                        " bytes, payload CRC " + std::to_string(summary.payload_crc32c) + "; " +
                        manifest_name(ref.checkpoint) + " says " + std::to_string(link.bytes) + " bytes, CRC " +
                        std::to_string(link.crc32c));
  auto snap = decode(copy, snapshot_limits());
  if (!snap)
    return in_memory(damaged(link.file, snap.error()));
  manifest_entry found{snap->root().getShard(), link.file, summary.file_bytes, summary.payload_crc32c, 0, 0, {}};
  auto link_checkpoint = i == e.chain.size() ? ref.checkpoint : e.chain[i].checkpoint;
  if (auto err = check_expected(*snap, found, link, link_checkpoint, ref.run_id, ref.config_hash,
                                manifest_name(ref.checkpoint)))
    return in_memory(err);
  if (auto err = check_linkage(snap->root(), e, i))
    return in_memory(err);
  return snap;
}

std::vector<chain_link> chain_files(const snapshot_ref& ref) {
  auto files = ref.entry.chain;
  files.push_back({ref.checkpoint, ref.entry.file, ref.entry.bytes, ref.entry.crc32c});
  return files;
}

bool chain_starts_with(const std::vector<chain_link>& files, const std::vector<chain_link>& prefix) {
  return prefix.size() <= files.size() && std::equal(prefix.begin(), prefix.end(), files.begin());
}

std::vector<snapshot_ref> refs_of(const fs::path& dir, const checkpoint_manifest& m) {
  std::vector<snapshot_ref> out;
  for (auto& e : m.shards)
    out.push_back({dir.string(), m.checkpoint, m.step, e, m.run.run_id, m.run.config_hash});
  return out;
}

caf::expected<stored_snapshot> read_chain_link(file_io& io, const snapshot_ref& ref, size_t i, buffer_pool& pool,
                                               verify_mode mode) {
  return read_link(io, ref.dir, ref.entry, i, ref.checkpoint, ref.run_id, ref.config_hash,
                   manifest_name(ref.checkpoint), pool, mode);
}

caf::expected<stored_snapshot> read_snapshot_ref(file_io& io, const snapshot_ref& ref, buffer_pool& pool,
                                                 verify_mode mode) {
  if (!ref.entry.chain.empty())
    return make_error(errc::invalid_argument,
                      ref.entry.file + ": a delta (the last of a chain of " + std::to_string(ref.entry.chain.size() + 1) +
                        " files on the base " + ref.entry.chain[0].file +
                        "), not a whole snapshot; read its chain with read_chain_link");
  return read_chain_link(io, ref, 0, pool, mode);
}

caf::expected<checkpoint_manifest> read_manifest_file(file_io& io, const fs::path& p,
                                                      buffer_pool& pool) {
  auto contents = read_sealed(io, p, manifest_file_magic, pool, true);
  if (!contents)
    return std::move(contents.error());
  auto m = decode<schema::CheckpointManifest>(contents->message);
  if (!m)
    return damaged(p, m.error());
  auto r = m->root();
  checkpoint_manifest out;
  out.checkpoint = r.getCheckpoint();
  out.step = r.getStep();
  out.created_unix_ms = r.getCreatedUnixMs();
  out.run = {r.getRunId().cStr(), r.getConfigHash().cStr(), r.getConfig().cStr()};
  for (auto e : r.getShards()) out.shards.push_back(entry_of(e));
  std::sort(out.shards.begin(), out.shards.end(),
            [](const manifest_entry& a, const manifest_entry& b) { return a.shard < b.shard; });
  return out;
}

caf::error check_manifest_step(const checkpoint_manifest& m, const std::string& manifest_file,
                               uint64_t largest_snapshot_step) {
  if (m.step == largest_snapshot_step)
    return {};
  return make_error(errc::damaged_snapshot, manifest_file + ": records step " + std::to_string(m.step) +
                                              ", but its snapshots were taken at step " +
                                              std::to_string(largest_snapshot_step) + " (the largest of theirs)");
}

caf::error write_manifest_file(file_io& io, const fs::path& dir, const std::string& name,
                               const checkpoint_manifest& m, const std::string& tmp_tag) {
  size_t hint = 32 + (m.run.run_id.size() + m.run.config_hash.size() + m.run.config.size()) / 8 + 3;
  for (auto& e : m.shards) {
    hint += 8 + e.file.size() / 8;
    for (auto& l : e.chain) hint += 6 + l.file.size() / 8;
  }
  auto msg = build<schema::CheckpointManifest>(hint, [&](schema::CheckpointManifest::Builder b) {
    b.setCheckpoint(m.checkpoint);
    b.setStep(m.step);
    b.setCreatedUnixMs(m.created_unix_ms);
    b.setRunId(m.run.run_id);
    b.setConfigHash(m.run.config_hash);
    b.setConfig(m.run.config);
    auto shards = b.initShards(static_cast<unsigned>(m.shards.size()));
    for (unsigned i = 0; i < m.shards.size(); ++i) set_entry(shards[i], m.shards[i]);
  });
  if (auto d = decode(msg); !d)
    return in_context(d.error(), "refusing to write " + name + ": ");
  auto summary = write_sealed(io, dir, name, manifest_file_magic, *msg.frame(), tmp_tag);
  if (!summary)
    return std::move(summary.error());
  return {};
}

}  // namespace keel
