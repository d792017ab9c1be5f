// Rows out of a running job for an application; see row_read.hpp.
#include "actors/job/row_read.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "actors/core/hash_slots.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/core/worker_core.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"
#include "supervision/directory.hpp"

namespace keel {

namespace {

using shards_done = std::function<void(caf::expected<std::vector<caf::actor>>)>;

void lookup_from(controller_actor* self, caf::actor directory, std::shared_ptr<std::vector<caf::actor>> found,
                 uint32_t i, shards_done done) {
  if (i == found->size())
    return done(std::move(*found));
  auto name = to_string(actor_id::shard(i));
  self->request(directory, std::chrono::seconds(2), supervision::lookup_atom::value, name)
    .then(
      [=](const supervision::directory_update& u) {
        if (u.state != supervision::name_state::up)
          return done(make_error(errc::not_found, name + " is not up"));
        (*found)[i] = u.handle;
        lookup_from(self, directory, found, i + 1, done);
      },
      [=](caf::error& err) { done(make_error(errc::not_found, name + " not found: " + describe(err))); });
}

// One read of rows: the keys grouped by shard, the rows laid back in the
// order asked.
struct rows_run {
  uint32_t table = 0;
  std::vector<uint64_t> keys;
  std::vector<shard_split> tables;         // only `table`'s holds keys
  std::vector<uint32_t> dims;              // of every table
  std::vector<std::vector<float>> rows;    // only `table`'s holds rows
  size_t pending = 0;
  bool failed = false;
  std::function<void(caf::expected<std::vector<float>>)> done;

  shard_split& split() { return tables[table]; }
  void fail(caf::error err) {
    if (!failed) {
      failed = true;
      done(std::move(err));
    }
  }
};

void pull_rows(controller_actor* self, std::shared_ptr<rows_run> r, const std::vector<caf::actor>& shards) {
  for (uint32_t s = 0; s < shards.size(); ++s) {
    if (r->split().count(s) == 0)
      continue;
    ++r->pending;
    self->request(shards[s], std::chrono::seconds(10), make_pull_request(0, s, 0, 0, key_range{}, {}, r->tables))
      .then(
        [r, s](const pull_reply_msg& m) {
          if (r->failed)
            return;
          auto d = decode(m);
          if (!d)
            return r->fail(d.error());
          if (auto err = take_pulled_rows(s, d->root(), r->tables, r->dims, r->rows))
            return r->fail(err);
          if (--r->pending == 0)
            r->done(std::move(r->rows[r->table]));
        },
        [r, s](caf::error& err) {
          r->fail(make_error(errc::not_found, "shard " + std::to_string(s) + " did not answer: " + describe(err)));
        });
  }
  if (r->pending == 0)
    r->done(std::move(r->rows[r->table]));
}

// Shard `shard`'s rows of `table` from its snapshot (validated as a
// restore validates it), appended to `out`.
caf::error take_table(controller_actor* self, uint32_t shard, uint32_t table, const shard_snapshot_msg& m,
                      job::table_now& out) {
  auto& st = self->state;
  auto d = decode(m);
  if (!d)
    return d.error();
  auto core = restore_shard(st.run.shard_cfgs.at(shard), d->root(), verify_mode::checksums,
                            model_table_rows(st.cfg.training_model, st.cfg.training.seed));
  if (!core)
    return core.error();
  const auto& rows = core->tables().at(table);
  for (auto key : rows.keys_in_order()) {
    out.keys.push_back(key);
    const float* row = rows.find_row(key);
    out.values.insert(out.values.end(), row, row + out.dim);
  }
  return {};
}

// Every shard's rows of `table`, one shard at a time (one shard's snapshot
// held at once besides the merged table), then sorted by key.
void gather_table(controller_actor* self, std::shared_ptr<std::vector<caf::actor>> shards, uint32_t shard,
                  uint32_t table, std::shared_ptr<job::table_now> out,
                  std::function<void(caf::expected<job::table_now>)> done) {
  if (shard == shards->size()) {
    std::vector<size_t> order(out->keys.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out->keys[a] < out->keys[b]; });
    job::table_now sorted;
    sorted.dim = out->dim;
    for (auto i : order) {
      sorted.keys.push_back(out->keys[i]);
      sorted.values.insert(sorted.values.end(), out->values.begin() + i * out->dim,
                           out->values.begin() + (i + 1) * out->dim);
    }
    return done(std::move(sorted));
  }
  auto req = build<schema::SnapshotRequest>(8, [&](schema::SnapshotRequest::Builder b) {
    b.setCheckpoint(0);
    b.setShard(shard);
  });
  self->request((*shards)[shard], std::chrono::seconds(30), req)
    .then(
      [=](const shard_snapshot_msg& m) {
        if (auto err = take_table(self, shard, table, m, *out))
          return done(err);
        gather_table(self, shards, shard + 1, table, out, done);
      },
      [=](caf::error& err) {
        done(make_error(errc::not_found, "shard " + std::to_string(shard) + " did not answer: " + describe(err)));
      });
}

}  // namespace

void lookup_shards(controller_actor* self, std::function<void(caf::expected<std::vector<caf::actor>>)> done) {
  auto& st = self->state;
  if (!st.run.tree)
    return done(make_error(errc::not_found, "the job is not running"));
  auto found = std::make_shared<std::vector<caf::actor>>(st.cfg.training.shards);
  lookup_from(self, st.run.tree->directory(), found, 0, std::move(done));
}

void read_rows(controller_actor* self, uint32_t table, std::vector<uint64_t> keys,
               std::function<void(caf::expected<std::vector<float>>)> done) {
  auto& st = self->state;
  auto r = std::make_shared<rows_run>();
  r->table = table;
  for (auto& t : st.cfg.training_model->layout().tables()) r->dims.push_back(t.dim);
  r->keys = std::move(keys);
  r->rows.resize(r->dims.size());
  r->rows[table].resize(r->keys.size() * r->dims[table]);
  r->done = std::move(done);
  uint32_t shards = st.cfg.training.shards;
  auto map = slot_map::from_owners(st.run.shard_cfgs.at(0).table_slot_owners, shards);
  if (!map)
    return r->done(make_error(errc::invalid_argument, describe(map.error())));
  r->tables.resize(r->dims.size());
  for (auto& other : r->tables) split_by_shard(*map, nullptr, 0, other);  // none of their keys
  split_by_shard(*map, r->keys.data(), r->keys.size(), r->split());
  lookup_shards(self, [self, r](caf::expected<std::vector<caf::actor>> found) {
    if (!found)
      return r->fail(found.error());
    pull_rows(self, r, *found);
  });
}

void read_table(controller_actor* self, uint32_t table, std::function<void(caf::expected<job::table_now>)> done) {
  auto out = std::make_shared<job::table_now>();
  out->dim = self->state.cfg.training_model->layout().tables().at(table).dim;
  lookup_shards(self, [self, table, out, done](caf::expected<std::vector<caf::actor>> found) {
    if (!found)
      return done(found.error());
    gather_table(self, std::make_shared<std::vector<caf::actor>>(std::move(*found)), 0, table, out, done);
  });
}

}  // namespace keel
