#include "storage/snapshot_store.hpp"

#include <algorithm>
#include <set>

#include <unistd.h>

#include "messages/errors.hpp"
#include "storage/error_context.hpp"
#include "storage/store_layout.hpp"

namespace keel {

namespace fs = std::filesystem;

namespace {

caf::error damaged(const std::string& file, const std::string& why) {
  return make_error(errc::damaged_snapshot, file + ": " + why);
}

}  // namespace

const stored_snapshot* loaded_checkpoint::shard(uint32_t shard) const {
  for (auto& s : snapshots)
    if (s.root().getShard() == shard)
      return &s;
  return nullptr;
}

snapshot_store::snapshot_store(fs::path dir, store_options opts)
  : dir_(std::move(dir)), opts_(std::move(opts)) {}

caf::expected<std::unique_ptr<snapshot_store>> snapshot_store::open(fs::path dir,
                                                                    store_options opts) {
  if (opts.keep_last == 0)
    return make_error(errc::invalid_argument, "snapshot_store: keep_last must be at least 1");
  if (!opts.io || !opts.pool)
    return make_error(errc::invalid_argument, "snapshot_store: io and pool must be set");
  if (auto err = opts.io->create_dirs(dir))
    return in_context(err, "opening snapshot store: ");
  std::unique_ptr<snapshot_store> store(new snapshot_store(std::move(dir), std::move(opts)));
  if (auto err = store->recover())
    return in_context(err, "opening snapshot store " + store->dir_.string() + ": ");
  return store;
}

std::string snapshot_store::next_tmp_tag() {
  std::lock_guard<std::mutex> guard(tag_mtx_);
  return std::to_string(::getpid()) + "-" + std::to_string(++tmp_counter_);
}

caf::expected<std::vector<uint64_t>> snapshot_store::committed_locked() const {
  auto names = opts_.io->list(dir_);
  if (!names)
    return std::move(names.error());
  std::vector<uint64_t> ids;
  for (auto& n : *names)
    if (auto f = parse_store_file_name(n); f && f->kind == store_file_kind::manifest)
      ids.push_back(f->checkpoint);
  std::sort(ids.begin(), ids.end());
  return ids;
}

caf::expected<std::vector<uint64_t>> snapshot_store::committed() const {
  return committed_locked();
}

// The snapshot files the manifests of `ids` name, as entries or in their
// chains. An unreadable manifest is an error: it might name any file.
caf::expected<std::set<std::string>> snapshot_store::named_files(const std::vector<uint64_t>& ids) const {
  std::set<std::string> out;
  for (auto id : ids) {
    auto m = manifest(id);
    if (!m)
      return in_context(m.error(), "keeping every snapshot file, as " + manifest_name(id) +
                                     " cannot be read to tell which it needs: ");
    for (auto& e : m->shards) {
      out.insert(e.file);
      for (auto& l : e.chain)
        out.insert(l.file);
    }
  }
  return out;
}

// Removes manifests beyond the newest keep_last, then every snapshot or
// temporary file of checkpoint `limit` or older that no kept manifest
// covers: a snapshot file is kept when its checkpoint's manifest is kept or
// a kept manifest names it (as an entry, or in a chain: a chain's old base
// lives as long as a manifest needs it), and files of a later checkpoint
// may belong to a write in progress. If a kept manifest cannot be read, no
// snapshot file is removed (temporary ones are) and `*unreadable` says why.
// Manifests go first and are made durable before their snapshots go: a
// crash in between leaves uncommitted snapshots, which the next sweep removes.
caf::error snapshot_store::apply_retention(uint64_t limit, std::vector<uint64_t>& removed,
                                           caf::error* unreadable) {
  auto names = opts_.io->list(dir_);
  if (!names)
    return std::move(names.error());
  std::vector<uint64_t> manifests;
  std::vector<std::pair<std::string, store_file_name>> others;
  for (auto& n : *names) {
    auto f = parse_store_file_name(n);
    if (!f)
      continue;
    if (f->kind == store_file_kind::manifest)
      manifests.push_back(f->checkpoint);
    else
      others.emplace_back(n, *f);
  }
  std::sort(manifests.begin(), manifests.end());
  size_t drop = manifests.size() > opts_.keep_last ? manifests.size() - opts_.keep_last : 0;
  for (size_t i = 0; i < drop; ++i) {
    if (auto err = opts_.io->remove(dir_ / manifest_name(manifests[i])))
      return err;
    removed.push_back(manifests[i]);
  }
  if (drop > 0)
    if (auto err = opts_.io->sync_dir(dir_))
      return err;
  std::vector<uint64_t> kept_ids(manifests.begin() + static_cast<std::ptrdiff_t>(drop), manifests.end());
  std::set<uint64_t> kept(kept_ids.begin(), kept_ids.end());
  auto named = named_files(kept_ids);
  bool any = false;
  for (auto& [name, f] : others) {
    if (f.checkpoint > limit)
      continue;
    if (f.kind == store_file_kind::snapshot &&
        (!named || kept.count(f.checkpoint) != 0 || named->count(name) != 0))
      continue;
    if (auto err = opts_.io->remove(dir_ / name); err && !is(err, errc::not_found))
      return err;
    any = true;
  }
  if (!named)
    *unreadable = std::move(named.error());
  return any ? opts_.io->sync_dir(dir_) : caf::error{};
}

// With shards_write, files of checkpoints newer than the newest committed
// one are left alone: while a restarted checkpointer opens the store, the
// shards may be writing the next checkpoint. Those of a run that died go
// with the retention of a later commit, or with discard_after when a run
// resumes.
caf::error snapshot_store::recover() {
  std::lock_guard<std::mutex> guard(commit_mtx_);
  auto ids = committed_locked();
  if (!ids)
    return std::move(ids.error());
  newest_committed_ = ids->empty() ? 0 : ids->back();
  std::vector<uint64_t> removed;
  // A kept manifest that cannot be read keeps every snapshot file; the
  // store still opens (latest_valid skips that checkpoint, naming it).
  caf::error unreadable;
  return apply_retention(opts_.shards_write ? newest_committed_ : UINT64_MAX, removed, &unreadable);
}

caf::expected<manifest_entry> snapshot_store::write_snapshot(const shard_snapshot_msg& snapshot) {
  return write_snapshot_of(snapshot, 0);
}

// One decode per snapshot: the checks and the name come from the decoded
// snapshot that write_snapshot_file validates before it writes.
caf::expected<manifest_entry> snapshot_store::write_snapshot_of(const shard_snapshot_msg& snapshot,
                                                                uint64_t expected_checkpoint) {
  auto named = write_snapshot_file(
    *opts_.io, dir_, snapshot, next_tmp_tag(),
    [&](schema::ShardSnapshot::Reader s) -> caf::expected<std::string> {
      auto checkpoint = s.getCheckpoint();
      if (expected_checkpoint != 0 && checkpoint != expected_checkpoint)
        return make_error(errc::invalid_argument,
                          "write_checkpoint " + std::to_string(expected_checkpoint) +
                            ": a snapshot belongs to checkpoint " + std::to_string(checkpoint));
      std::lock_guard<std::mutex> guard(commit_mtx_);
      if (checkpoint == 0 || checkpoint <= newest_committed_)
        return make_error(errc::invalid_argument,
                          "write_snapshot: checkpoint " + std::to_string(checkpoint) +
                            " is not newer than the newest committed one (" +
                            std::to_string(newest_committed_) + "); ids start at 1 and grow");
      return snapshot_name(checkpoint, s.getShard());
    });
  if (!named && is(named.error(), errc::invalid_argument))
    return named;
  if (!named)
    return in_context(named.error(), "write_snapshot: ");
  return named;
}

// Whether `file` is in the directory with `bytes` bytes: a manifest must
// never name a file that is not there.
caf::error snapshot_store::check_present(const std::string& file, uint64_t bytes) const {
  auto f = opts_.io->open(dir_ / file);
  if (!f)
    return std::move(f.error());
  auto size = (*f)->size();
  if (!size)
    return size.error();
  if (*size != bytes)
    return make_error(errc::invalid_argument,
                      file + " holds " + std::to_string(*size) + " bytes, the entry says " + std::to_string(bytes));
  return {};
}

// Every link of `e`'s chain names a snapshot file of e.shard, of a
// checkpoint older than `checkpoint`, ascending along the chain, present
// with its recorded length.
caf::error snapshot_store::check_chain(const manifest_entry& e, uint64_t checkpoint) const {
  auto shard = std::to_string(e.shard);
  uint64_t before = 0;
  for (size_t i = 0; i < e.chain.size(); ++i) {
    auto& l = e.chain[i];
    auto named = parse_store_file_name(l.file);
    auto refuse = [&](const std::string& why) {
      return make_error(errc::invalid_argument, "shard " + shard + "'s chain, file " + std::to_string(i) + " ('" +
                                                  l.file + "'): " + why);
    };
    if (!named || named->kind != store_file_kind::snapshot || named->shard != e.shard)
      return refuse("not a snapshot file of shard " + shard);
    if (named->checkpoint != l.checkpoint)
      return refuse("a file of checkpoint " + std::to_string(named->checkpoint) + ", the link says checkpoint " +
                    std::to_string(l.checkpoint));
    if (l.checkpoint >= checkpoint)
      return refuse("of checkpoint " + std::to_string(l.checkpoint) + ", not older than the entry's (" +
                    std::to_string(checkpoint) + ")");
    if (i > 0 && l.checkpoint <= before)
      return refuse("of checkpoint " + std::to_string(l.checkpoint) + ", not newer than the file before it (" +
                    std::to_string(before) + "): a chain ascends");
    if (auto err = check_present(l.file, l.bytes))
      return refuse(error_text(err));
    before = l.checkpoint;
  }
  return {};
}

caf::error snapshot_store::check_commit(checkpoint_manifest& m) const {
  auto refuse = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "commit of checkpoint " + std::to_string(m.checkpoint) + ": " + why);
  };
  if (m.checkpoint == 0 || m.checkpoint <= newest_committed_)
    return refuse("not newer than the newest committed checkpoint (" +
                  std::to_string(newest_committed_) + ")");
  if (m.shards.empty())
    return refuse("no shard snapshots");
  std::sort(m.shards.begin(), m.shards.end(),
            [](const manifest_entry& a, const manifest_entry& b) { return a.shard < b.shard; });
  for (size_t i = 0; i < m.shards.size(); ++i) {
    auto& e = m.shards[i];
    if (i > 0 && e.shard == m.shards[i - 1].shard)
      return refuse("shard " + std::to_string(e.shard) + " appears twice");
    auto named = parse_store_file_name(e.file);
    if (!named || named->kind != store_file_kind::snapshot || named->checkpoint != m.checkpoint ||
        named->shard != e.shard)
      return refuse("shard " + std::to_string(e.shard) + " names '" + e.file + "', not a snapshot file of shard " +
                    std::to_string(e.shard) + " in checkpoint " + std::to_string(m.checkpoint) + " (" +
                    snapshot_name(m.checkpoint, e.shard) + ", or with a tag)");
    if (auto err = check_present(e.file, e.bytes))
      return is(err, errc::invalid_argument) ? refuse(error_text(err))
                                             : in_context(err, "commit of checkpoint " + std::to_string(m.checkpoint) + ": ");
    if (auto err = check_chain(e, m.checkpoint))
      return refuse(error_text(err));
  }
  return {};
}

caf::expected<commit_result> snapshot_store::commit(checkpoint_manifest m) {
  std::lock_guard<std::mutex> guard(commit_mtx_);
  if (m.run.empty())
    m.run = opts_.run;
  if (auto err = check_commit(m))
    return err;
  auto name = manifest_name(m.checkpoint);
  if (auto err = write_manifest_file(*opts_.io, dir_, name, m, next_tmp_tag())) {
    // The manifest may have been renamed into place before the directory
    // fsync failed; a checkpoint reported as failed must not appear later.
    auto gone = opts_.io->remove(dir_ / name);
    if (gone && !is(gone, errc::not_found))
      return in_context(err, "checkpoint " + std::to_string(m.checkpoint) +
                               " not committed, and its manifest could not be removed (" +
                               error_text(gone) + "): ");
    if (!gone)
      opts_.io->sync_dir(dir_);  // best effort; the manifest was never durable
    return in_context(err, "checkpoint " + std::to_string(m.checkpoint) + " not committed: ");
  }
  newest_committed_ = m.checkpoint;
  commit_result out;
  out.checkpoint = m.checkpoint;
  caf::error unreadable;
  out.retention_problem = apply_retention(m.checkpoint, out.removed, &unreadable);
  if (!out.retention_problem)
    out.retention_problem = std::move(unreadable);
  return out;
}

caf::expected<commit_result> snapshot_store::write_checkpoint(
  uint64_t checkpoint, uint64_t step, int64_t created_unix_ms,
  const std::vector<shard_snapshot_msg>& snapshots) {
  checkpoint_manifest m{checkpoint, step, created_unix_ms, {}, {}};
  for (auto& s : snapshots) {
    auto entry = write_snapshot_of(s, checkpoint);
    if (!entry) {
      abandon(checkpoint);
      return in_context(entry.error(),
                        "checkpoint " + std::to_string(checkpoint) + " not committed: ");
    }
    m.shards.push_back(std::move(*entry));
  }
  auto result = commit(std::move(m));
  if (!result)
    abandon(checkpoint);
  return result;
}

// A newer manifest may name a file of `checkpoint` in a chain (a shard
// chained on its own file of a checkpoint that never committed): such a
// file stays, and if one of them cannot be read, every snapshot file does.
caf::error snapshot_store::abandon(uint64_t checkpoint) {
  std::lock_guard<std::mutex> guard(commit_mtx_);
  auto names = opts_.io->list(dir_);
  if (!names)
    return std::move(names.error());
  std::set<std::string> present(names->begin(), names->end());
  if (present.count(manifest_name(checkpoint)) != 0)
    return {};
  std::vector<uint64_t> newer;
  for (auto& n : present)
    if (auto f = parse_store_file_name(n); f && f->kind == store_file_kind::manifest && f->checkpoint > checkpoint)
      newer.push_back(f->checkpoint);
  auto named = named_files(newer);
  bool any = false;
  for (auto& n : present) {
    auto f = parse_store_file_name(n);
    if (!f || f->checkpoint != checkpoint)
      continue;
    if (f->kind == store_file_kind::snapshot && (!named || named->count(n) != 0))
      continue;
    if (auto err = opts_.io->remove(dir_ / n); err && !is(err, errc::not_found))
      return err;
    any = true;
  }
  if (any)
    if (auto err = opts_.io->sync_dir(dir_))
      return err;
  return named ? caf::error{} : std::move(named.error());
}

caf::expected<std::vector<uint64_t>> snapshot_store::discard_after(uint64_t checkpoint) {
  std::lock_guard<std::mutex> guard(commit_mtx_);
  auto names = opts_.io->list(dir_);
  if (!names)
    return std::move(names.error());
  std::vector<uint64_t> removed;
  std::vector<std::string> others;
  // Manifests first: once they are gone, a crash leaves only uncommitted
  // files, which open() cleans up.
  for (auto& n : *names) {
    auto f = parse_store_file_name(n);
    if (!f || f->checkpoint <= checkpoint)
      continue;
    if (f->kind != store_file_kind::manifest) {
      others.push_back(n);
      continue;
    }
    if (auto err = opts_.io->remove(dir_ / n); err && !is(err, errc::not_found))
      return err;
    removed.push_back(f->checkpoint);
  }
  if (!removed.empty())
    if (auto err = opts_.io->sync_dir(dir_))
      return err;
  for (auto& n : others)
    if (auto err = opts_.io->remove(dir_ / n); err && !is(err, errc::not_found))
      return err;
  if (!others.empty())
    if (auto err = opts_.io->sync_dir(dir_))
      return err;
  std::sort(removed.begin(), removed.end());
  newest_committed_ = std::min(newest_committed_, checkpoint);
  return removed;
}

caf::expected<stored_snapshot> snapshot_store::read_entry(const checkpoint_manifest& m,
                                                          const manifest_entry& e,
                                                          const std::string& manifest_file,
                                                          buffer_pool& pool) const {
  return read_committed_snapshot(*opts_.io, dir_, manifest_file, m, e, pool);
}

// Every file of `e`'s chain, in order, validated one at a time into
// `passing` (which caches nothing) and let go; then the entry's own file
// into `own`. `*bad_file` names the file being read.
caf::expected<stored_snapshot> snapshot_store::read_chain(const checkpoint_manifest& m, const manifest_entry& e,
                                                          const std::string& manifest_file, buffer_pool& passing,
                                                          buffer_pool& own, std::string* bad_file) const {
  for (size_t i = 0; i < e.chain.size(); ++i) {
    *bad_file = e.chain[i].file;
    auto link = read_committed_link(*opts_.io, dir_, manifest_file, m, e, i, passing);
    if (!link)
      return std::move(link.error());
  }
  *bad_file = e.file;
  return read_entry(m, e, manifest_file, own);
}

// With `keep` false every snapshot is validated and let go at once, into a
// pool that caches nothing: the result holds the manifest alone. Chain
// files are never held.
caf::expected<loaded_checkpoint> snapshot_store::load(uint64_t checkpoint, std::string* bad_file,
                                                      bool keep) const {
  auto name = manifest_name(checkpoint);
  *bad_file = name;
  auto m = read_manifest_file(*opts_.io, dir_ / name, *opts_.pool);
  if (!m) {
    if (is(m.error(), errc::not_found))
      return make_error(errc::not_found, "checkpoint " + std::to_string(checkpoint) +
                                           " is not committed: " + name + " is missing");
    return std::move(m.error());
  }
  if (m->checkpoint != checkpoint)
    return damaged(name, "records checkpoint " + std::to_string(m->checkpoint));
  auto passing = buffer_pool::create(0, 0);
  loaded_checkpoint out;
  uint64_t largest_step = 0;
  for (auto& e : m->shards) {
    auto snap = read_chain(*m, e, name, *passing, keep ? *opts_.pool : *passing, bad_file);
    if (!snap)
      return std::move(snap.error());
    largest_step = std::max(largest_step, snap->root().getStep());
    if (keep)
      out.snapshots.push_back(std::move(*snap));
  }
  *bad_file = name;
  if (auto err = check_manifest_step(*m, name, largest_step))
    return err;
  out.manifest = std::move(*m);
  return out;
}

caf::expected<loaded_checkpoint> snapshot_store::load(uint64_t checkpoint) const {
  std::string bad_file;
  return load(checkpoint, &bad_file);
}

caf::expected<checkpoint_manifest> snapshot_store::manifest(uint64_t checkpoint) const {
  auto name = manifest_name(checkpoint);
  auto m = read_manifest_file(*opts_.io, dir_ / name, *opts_.pool);
  if (m && m->checkpoint != checkpoint)
    return damaged(name, "records checkpoint " + std::to_string(m->checkpoint));
  return m;
}

caf::expected<stored_snapshot> snapshot_store::read_snapshot(uint64_t checkpoint,
                                                             uint32_t shard) const {
  auto name = manifest_name(checkpoint);
  auto m = read_manifest_file(*opts_.io, dir_ / name, *opts_.pool);
  if (!m)
    return std::move(m.error());
  for (auto& e : m->shards)
    if (e.shard == shard)
      return read_entry(*m, e, name, *opts_.pool);
  return make_error(errc::not_found, "checkpoint " + std::to_string(checkpoint) +
                                       " has no snapshot of shard " + std::to_string(shard));
}

// The newest committed checkpoint that loads (with `keep`, its snapshots
// held); `take` makes the result of it and of the newer ones skipped.
template <class Result, class Take>
caf::expected<Result> snapshot_store::newest_loading(bool keep, Take take) const {
  auto ids = committed_locked();
  if (!ids)
    return std::move(ids.error());
  if (ids->empty())
    return make_error(errc::not_found, "no committed checkpoint in " + dir_.string());
  std::vector<damage_report> skipped;
  for (auto it = ids->rbegin(); it != ids->rend(); ++it) {
    std::string bad_file;
    auto c = load(*it, &bad_file, keep);
    if (c)
      return take(std::move(*c), std::move(skipped));
    skipped.push_back({bad_file, std::move(c.error())});
  }
  std::string why;
  for (auto& d : skipped)
    why += (why.empty() ? "" : "; ") + describe(d.reason);
  return make_error(errc::not_found, "no valid checkpoint in " + dir_.string() + ": " + why);
}

caf::expected<latest_checkpoint> snapshot_store::latest_valid() const {
  return newest_loading<latest_checkpoint>(true, [](loaded_checkpoint c, std::vector<damage_report> skipped) {
    return latest_checkpoint{std::move(c), std::move(skipped)};
  });
}

caf::expected<verified_checkpoint> snapshot_store::latest_verified() const {
  return newest_loading<verified_checkpoint>(false, [](loaded_checkpoint c, std::vector<damage_report> skipped) {
    return verified_checkpoint{std::move(c.manifest), std::move(skipped)};
  });
}

}  // namespace keel
