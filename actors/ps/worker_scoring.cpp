// A worker scores a held-out slice for the job (score_atom, slice_task):
// the slice's rows come from the shards through the worker's own routing
// (its current shard incarnations, their fencing epochs, the data plane
// where it routes), as a PullRequest at clock 0 that every consistency
// rule serves at once, so scoring never waits on or moves the step loop;
// the model scores the slice on a scratch of its own, and the answer is
// the slice's partial_evaluation (actors/core/slice_wire.hpp). A failure
// answers the job with an error naming the worker, the slice and the shard
// or the model's complaint; the worker does not retry (the job gives the
// slice to another worker). Several slices may be in flight at once.
#include <memory>
#include <string>

#include "actors/core/actor_id.hpp"
#include "actors/core/slice_rows.hpp"
#include "actors/ps/worker_state.hpp"
#include "messages/errors.hpp"

namespace keel::worker_detail {

namespace {

struct scoring {
  caf::typed_response_promise<slice_score> rp;
  std::unique_ptr<model_scratch> scratch;
  slice_rows rows;
  std::vector<float> dense;
  std::string name;  // "worker:W, slice [a, b)"
  size_t pending = 0;
  bool over = false;
};

using scoring_ptr = std::shared_ptr<scoring>;

void fail_scoring(const scoring_ptr& s, const std::string& why) {
  if (s->over)
    return;
  s->over = true;
  s->rp.deliver(make_error(errc::not_found, "evaluation by " + s->name + ": " + why));
}

void finish_scoring(worker_actor* self, const scoring_ptr& s) {
  auto part = s->rows.score(*self->state.env.training_model, s->dense, *s->scratch);
  if (!part)
    return fail_scoring(s, describe(part.error()));
  s->over = true;
  s->rp.deliver(to_wire(s->rows.slice(), *part));
}

void pull_rows(worker_actor* self, const scoring_ptr& s, uint32_t shard) {
  auto& st = self->state;
  auto req = s->rows.request(shard, st.cfg.core.worker, st.core.shard_epoch(shard));
  ask_shard<pull_reply_msg>(
    self, shard, req,
    [self, s, shard](const pull_reply_msg& m) {
      if (s->over)
        return;
      auto d = decode(m);
      if (!d)
        return fail_scoring(s, describe(d.error()));
      if (auto err = s->rows.take(shard, d->root()))
        return fail_scoring(s, describe(err));
      if (--s->pending == 0)
        finish_scoring(self, s);
    },
    [self, s, shard](caf::error& err) {
      fail_scoring(s, self->state.cfg.core.shard_names[shard] + " did not answer: " +
                        self->system().render(err));
    });
}

}  // namespace

caf::result<slice_score> score_slice(worker_actor* self, slice_task task) {
  auto& st = self->state;
  auto& m = *st.env.training_model;
  auto s = std::make_shared<scoring>();
  test_slice slice{task.first, task.count};
  s->name = to_string(actor_id::worker(st.cfg.core.worker)) + ", slice [" + std::to_string(slice.first) +
            ", " + std::to_string(slice.first + slice.count) + ")";
  auto* slots = st.core.table_slots();
  if (!m.evaluates_slices() || !slots)
    return make_error(errc::invalid_argument, "evaluation by " + s->name + ": model " + m.name() +
                                                " does not score slices of embedding rows");
  if (task.dense.size() != m.layout().dense_size())
    return make_error(errc::invalid_argument, "evaluation by " + s->name + ": " +
                                                std::to_string(task.dense.size()) + " dense values for " +
                                                std::to_string(m.layout().dense_size()) + " dense keys");
  s->rp = self->make_response_promise<slice_score>();
  s->scratch = m.make_scratch();
  s->dense = std::move(task.dense);
  if (auto err = s->rows.prepare(m, *slots, slice, *s->scratch)) {
    fail_scoring(s, describe(err));
    return s->rp;
  }
  for (auto shard : s->rows.shards())
    if (!st.shards.at(shard)) {
      fail_scoring(s, st.cfg.core.shard_names[shard] + " is not known yet");
      return s->rp;
    }
  s->pending = s->rows.shards().size();
  if (s->pending == 0)
    finish_scoring(self, s);
  for (auto shard : s->rows.shards()) pull_rows(self, s, shard);
  return s->rp;
}

}  // namespace keel::worker_detail
