// The slices are scored one after another, each a round of pulls to every
// shard that holds some of its rows; see slice_evaluation.hpp.
#include "actors/job/slice_evaluation.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "actors/core/hash_slots.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"
#include "supervision/directory.hpp"

namespace keel {

namespace {

struct slice_run {
  controller_actor* self = nullptr;
  std::function<void(caf::expected<evaluation>)> done;
  std::shared_ptr<const model> m;
  std::unique_ptr<model_scratch> scratch;
  std::vector<float> dense;
  std::vector<caf::actor> shards;
  std::optional<slot_map> slots;
  std::vector<uint32_t> dims;
  test_slice slice;
  std::vector<uint64_t> sparse_keys;
  table_key_lists keys;
  std::vector<shard_split> split;             // per table
  std::vector<std::vector<float>> rows;       // per table, aligned with keys
  std::vector<table_rows> views;
  size_t pending = 0;
  bool failed = false;
  partial_evaluation merged;
};

using run_ptr = std::shared_ptr<slice_run>;

void next_slice(const run_ptr& r);

void fail(const run_ptr& r, caf::error err) {
  if (r->failed)
    return;
  r->failed = true;
  r->done(std::move(err));
}

pull_request_msg slice_pull(const slice_run& r, uint32_t shard) {
  return build<schema::PullRequest>(64, [&](schema::PullRequest::Builder b) {
    b.setWorker(0);
    b.setShard(shard);
    b.setClock(0);
    unsigned asked = 0;
    for (auto& s : r.split) asked += s.count(shard) > 0;
    auto out = b.initTables(asked);
    unsigned j = 0;
    for (uint32_t t = 0; t < r.split.size(); ++t) {
      size_t n = r.split[t].count(shard);
      if (n == 0)
        continue;
      out[j].setTable(t);
      std::memcpy(out[j++].initKeys(n * 8).begin(), r.split[t].keys_of(shard), n * 8);
    }
  });
}

// Lays `shard`'s rows where their keys sit in the slice's lists.
caf::error take_rows(slice_run& r, uint32_t shard, schema::PullReply::Reader reply) {
  auto blocks = reply.getTables();
  unsigned b = 0;
  for (uint32_t t = 0; t < r.split.size(); ++t) {
    size_t n = r.split[t].count(shard);
    if (n == 0)
      continue;
    uint32_t dim = r.dims[t];
    if (b >= blocks.size() || blocks[b].getTable() != t || blocks[b].getRows().size() != n * dim * 4)
      return make_error(errc::invalid_field, "evaluation: shard " + std::to_string(shard) +
                                               "'s reply does not hold the " + std::to_string(n) +
                                               " rows of table " + std::to_string(t) + " it was asked for");
    auto rows = blocks[b++].getRows().begin();
    auto pos = r.split[t].positions_of(shard);
    for (size_t i = 0; i < n; ++i)
      std::memcpy(r.rows[t].data() + pos[i] * dim, rows + i * dim * 4, dim * 4);
  }
  return {};
}

void score_slice(const run_ptr& r) {
  parameter_view view{r->dense, {}, {}};
  for (size_t t = 0; t < r->views.size(); ++t) r->views[t] = {r->keys[t], r->rows[t]};
  view.tables = span<const table_rows>(r->views.data(), r->views.size());
  auto part = r->m->evaluate_slice(r->slice, view, *r->scratch);
  if (!part)
    return fail(r, part.error());
  r->merged.merge(*part);
  r->slice.first += r->slice.count;
  next_slice(r);
}

void pull_slice(const run_ptr& r) {
  r->pending = 0;
  for (uint32_t s = 0; s < r->shards.size(); ++s) {
    bool asks = std::any_of(r->split.begin(), r->split.end(), [s](const shard_split& x) { return x.count(s) > 0; });
    if (!asks)
      continue;
    ++r->pending;
    r->self->request(r->shards[s], std::chrono::seconds(10), slice_pull(*r, s))
      .then(
        [r, s](const pull_reply_msg& m) {
          if (r->failed)
            return;
          auto d = decode(m);
          if (!d)
            return fail(r, d.error());
          if (auto err = take_rows(*r, s, d->root()))
            return fail(r, err);
          if (--r->pending == 0)
            score_slice(r);
        },
        [r, s](caf::error& err) {
          fail(r, make_error(errc::not_found, "evaluation: shard " + std::to_string(s) +
                                                " did not answer: " + describe(err)));
        });
  }
  if (r->pending == 0)
    score_slice(r);
}

void next_slice(const run_ptr& r) {
  auto total = r->m->num_test_examples();
  if (r->slice.first >= total)
    return r->done(r->merged.result());
  r->slice.count = std::min(slice_examples, total - r->slice.first);
  if (auto err = r->m->test_keys(r->slice, *r->scratch, r->sparse_keys, r->keys))
    return fail(r, err);
  for (size_t t = 0; t < r->dims.size(); ++t) {
    split_by_shard(*r->slots, r->keys[t].data(), r->keys[t].size(), r->split[t]);
    r->rows[t].resize(r->keys[t].size() * r->dims[t]);
  }
  pull_slice(r);
}

// Each shard's current incarnation, then the first slice.
void find_shards(const run_ptr& r, caf::actor directory, uint32_t i) {
  if (i == r->shards.size())
    return next_slice(r);
  auto name = to_string(actor_id::shard(i));
  r->self->request(directory, std::chrono::seconds(2), supervision::lookup_atom::value, name)
    .then(
      [r, directory, i, name](const supervision::directory_update& u) {
        if (u.state != supervision::name_state::up)
          return fail(r, make_error(errc::not_found, "evaluation: " + name + " is not up"));
        r->shards[i] = u.handle;
        find_shards(r, directory, i + 1);
      },
      [r, name](caf::error& err) {
        fail(r, make_error(errc::not_found, "evaluation: " + name + " not found: " + describe(err)));
      });
}

}  // namespace

void evaluate_by_slices(controller_actor* self, std::vector<float> dense,
                        std::function<void(caf::expected<evaluation>)> done) {
  auto& st = self->state;
  auto r = std::make_shared<slice_run>();
  r->self = self;
  r->done = std::move(done);
  r->m = st.cfg.training_model;
  r->scratch = r->m->make_scratch();
  r->dense = std::move(dense);
  uint32_t shards = st.cfg.training.shards;
  r->shards.resize(shards);
  auto map = slot_map::from_owners(st.run.shard_cfgs.empty() ? default_slot_owners(shards)
                                                             : st.run.shard_cfgs[0].table_slot_owners,
                                   shards);
  if (!map)
    return r->done(make_error(errc::invalid_argument, "evaluation: " + describe(map.error())));
  r->slots = *map;
  for (auto& t : r->m->layout().tables()) r->dims.push_back(t.dim);
  r->split.resize(r->dims.size());
  r->rows.resize(r->dims.size());
  r->views.resize(r->dims.size());
  if (!st.run.tree)
    return r->done(make_error(errc::not_found, "evaluation: the job is not running"));
  find_shards(r, st.run.tree->directory(), 0);
}

}  // namespace keel
