// Slices handed to workers on demand, failures reassigned, the caller as
// the last scorer; see slice_dispatch.hpp.
#include "actors/job/slice_dispatch.hpp"

#include <algorithm>
#include <deque>
#include <memory>

#include <caf/event_based_actor.hpp>

#include "actors/core/atoms.hpp"
#include "actors/core/slice_wire.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

struct worker_slot {
  slice_scorer scorer;
  uint32_t holding = 0;  // slices out with it
  bool alive = true;
};

struct dispatch {
  caf::event_based_actor* self = nullptr;
  slice_plan plan;
  std::function<void(caf::expected<evaluation>)> done;
  std::vector<test_slice> slices;
  std::deque<size_t> todo;  // slices nobody holds, in order
  std::vector<worker_slot> workers;
  size_t remaining = 0;     // slices not merged yet
  bool here_busy = false;   // the caller is scoring a slice
  bool over = false;
  partial_evaluation merged;
};

using dispatch_ptr = std::shared_ptr<dispatch>;

void hand_out(const dispatch_ptr& d);

std::string slice_text(test_slice s) {
  return "slice [" + std::to_string(s.first) + ", " + std::to_string(s.first + s.count) + ")";
}

void merge(const dispatch_ptr& d, const partial_evaluation& part, const std::string& by) {
  if (d->plan.on_scored)
    d->plan.on_scored(by);
  d->merged.merge(part);
  if (--d->remaining == 0) {
    d->over = true;
    d->done(d->merged.result());
  }
}

void worker_failed(const dispatch_ptr& d, size_t w, size_t i, const std::string& why) {
  auto& slot = d->workers[w];
  slot.alive = false;
  d->todo.push_front(i);
  if (d->plan.on_reassign)
    d->plan.on_reassign("evaluation: " + slot.scorer.name + " did not score " + slice_text(d->slices[i]) +
                        " (" + why + "); another scorer takes it");
  hand_out(d);
}

void send_slice(const dispatch_ptr& d, size_t w, size_t i) {
  auto& slot = d->workers[w];
  ++slot.holding;
  auto slice = d->slices[i];
  d->self->request(slot.scorer.handle, d->plan.deadline, score_atom::value,
                   slice_task{slice.first, slice.count, d->plan.dense})
    .then(
      [d, w, i, slice](const slice_score& s) {
        --d->workers[w].holding;
        if (d->over)
          return;
        auto part = from_wire(s, slice);
        if (!part)
          return worker_failed(d, w, i, describe(part.error()));
        merge(d, *part, d->workers[w].scorer.name);
        if (!d->over)
          hand_out(d);
      },
      [d, w, i](caf::error& err) {
        --d->workers[w].holding;
        if (!d->over)
          worker_failed(d, w, i, describe(err));
      });
}

// The caller scores the next slice nobody holds, then the one after.
void score_here(const dispatch_ptr& d) {
  if (d->here_busy || d->todo.empty() || d->over)
    return;
  auto i = d->todo.front();
  d->todo.pop_front();
  d->here_busy = true;
  d->plan.score_here(d->slices[i], [d, i](caf::expected<partial_evaluation> part) {
    d->here_busy = false;
    if (d->over)
      return;
    if (!part) {
      d->over = true;
      return d->done(make_error(errc::not_found, "evaluation of " + slice_text(d->slices[i]) + ": " +
                                                   describe(part.error())));
    }
    merge(d, *part, "");
    score_here(d);
  });
}

// Fills every live worker up to in_flight; with none left, the caller scores.
void hand_out(const dispatch_ptr& d) {
  bool any_alive = false;
  for (size_t w = 0; w < d->workers.size(); ++w) {
    auto& slot = d->workers[w];
    if (!slot.alive)
      continue;
    any_alive = true;
    while (slot.holding < d->plan.in_flight && !d->todo.empty()) {
      auto i = d->todo.front();
      d->todo.pop_front();
      send_slice(d, w, i);
    }
  }
  if (!any_alive)
    score_here(d);
}

}  // namespace

std::vector<test_slice> cut_slices(uint64_t examples, uint64_t slice_size) {
  std::vector<test_slice> out;
  for (uint64_t first = 0; first < examples; first += slice_size)
    out.push_back({first, std::min(slice_size, examples - first)});
  return out;
}

void dispatch_slices(caf::event_based_actor* self, slice_plan plan,
                     std::function<void(caf::expected<evaluation>)> done) {
  auto d = std::make_shared<dispatch>();
  d->self = self;
  d->done = std::move(done);
  d->slices = cut_slices(plan.examples, std::max<uint64_t>(plan.slice_size, 1));
  plan.in_flight = std::max<uint32_t>(plan.in_flight, 1);
  for (auto& w : plan.workers)
    if (w.handle)
      d->workers.push_back({w, 0, true});
  d->plan = std::move(plan);
  d->remaining = d->slices.size();
  for (size_t i = 0; i < d->slices.size(); ++i) d->todo.push_back(i);
  if (d->remaining == 0)
    return d->done(d->merged.result());
  hand_out(d);
}

}  // namespace keel
