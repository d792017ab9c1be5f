// The coordinator's side of slice scoring: the workers it hands slices to,
// and its own scoring of a slice, a round of pulls to every shard that holds
// some of its rows; see slice_evaluation.hpp.
#include "actors/job/slice_evaluation.hpp"

#include <memory>
#include <string>

#include "actors/core/hash_slots.hpp"
#include "actors/core/slice_rows.hpp"
#include "actors/job/row_read.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

// The coordinator scoring one slice at a time (the fallback of
// dispatch_slices, and all of it without workers).
struct here_scorer {
  controller_actor* self = nullptr;
  std::shared_ptr<const model> m;
  std::unique_ptr<model_scratch> scratch;
  std::vector<float> dense;
  std::vector<caf::actor> shards;  // empty until found
  std::optional<slot_map> slots;
  slice_rows rows;
  size_t pending = 0;
  bool failed = false;
  slice_done done;  // the slice being scored
};

using here_ptr = std::shared_ptr<here_scorer>;

// Hands the slice's outcome on. The continuation leaves `h` first: it holds
// the dispatch, which holds `h` (a cycle of shared pointers otherwise).
void deliver(const here_ptr& h, caf::expected<partial_evaluation> part) {
  auto done = std::move(h->done);
  h->done = nullptr;
  done(std::move(part));
}

void fail(const here_ptr& h, caf::error err) {
  if (h->failed)
    return;
  h->failed = true;
  deliver(h, std::move(err));
}

void pull_slice(const here_ptr& h) {
  h->pending = h->rows.shards().size();
  if (h->pending == 0)
    return deliver(h, h->rows.score(*h->m, h->dense, *h->scratch));
  for (auto s : h->rows.shards()) {
    h->self->request(h->shards[s], std::chrono::seconds(10), h->rows.request(s, 0, 0))
      .then(
        [h, s](const pull_reply_msg& m) {
          if (h->failed)
            return;
          auto d = decode(m);
          if (!d)
            return fail(h, d.error());
          if (auto err = h->rows.take(s, d->root()))
            return fail(h, err);
          if (--h->pending == 0)
            deliver(h, h->rows.score(*h->m, h->dense, *h->scratch));
        },
        [h, s](caf::error& err) {
          fail(h, make_error(errc::not_found, "evaluation: shard " + std::to_string(s) +
                                                " did not answer: " + describe(err)));
        });
  }
}

void score_here(const here_ptr& h, test_slice slice, slice_done done) {
  h->failed = false;
  h->done = std::move(done);
  if (h->shards.empty())  // each shard's current incarnation, once
    return lookup_shards(h->self, [h, slice](caf::expected<std::vector<caf::actor>> found) {
      if (!found)
        return fail(h, make_error(errc::not_found, "evaluation: " + describe(found.error())));
      h->shards = std::move(*found);
      score_here(h, slice, h->done);
    });
  if (auto err = h->rows.prepare(*h->m, *h->slots, slice, *h->scratch))
    return fail(h, err);
  pull_slice(h);
}

// The job's live workers, by index.
std::vector<slice_scorer> live_workers(const controller_state& st) {
  std::vector<slice_scorer> out;
  if (!st.cfg.evaluation.on_workers)
    return out;
  for (uint32_t w = 0; w < st.cfg.training.workers; ++w)
    if (auto it = st.run.handles.find(actor_id::worker(w)); it != st.run.handles.end() && it->second)
      out.push_back({to_string(actor_id::worker(w)), it->second});
  return out;
}

}  // namespace

void evaluate_by_slices(controller_actor* self, std::vector<float> dense,
                        std::function<void(caf::expected<evaluation>)> done) {
  auto& st = self->state;
  if (!st.run.tree)
    return done(make_error(errc::not_found, "evaluation: the job is not running"));
  auto h = std::make_shared<here_scorer>();
  h->self = self;
  h->m = st.cfg.training_model;
  h->scratch = h->m->make_scratch();
  h->dense = dense;
  uint32_t shards = st.cfg.training.shards;
  auto map = slot_map::from_owners(st.run.shard_cfgs.empty() ? default_slot_owners(shards)
                                                             : st.run.shard_cfgs[0].table_slot_owners,
                                   shards);
  if (!map)
    return done(make_error(errc::invalid_argument, "evaluation: " + describe(map.error())));
  h->slots = *map;
  slice_plan plan;
  plan.examples = h->m->num_test_examples();
  plan.dense = std::move(dense);
  plan.workers = live_workers(st);
  plan.deadline = st.cfg.evaluation.slice_deadline;
  plan.score_here = [h](test_slice slice, slice_done cb) { score_here(h, slice, std::move(cb)); };
  plan.on_reassign = [self](const std::string& why) {
    record(self, make_job_event(event_kind::retry, "job", why));
  };
  plan.on_scored = [self](const std::string& by) {
    ++self->state.readout.result.slices_scored[by.empty() ? "job" : by];
  };
  dispatch_slices(self, std::move(plan), std::move(done));
}

}  // namespace keel
