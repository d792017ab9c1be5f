// A shard's bookkeeping of its workers (shard_core.hpp): how far the
// slowest one has come, whether a pull at a clock may be served, and the
// floor elastic workers' spans put under their seqs (worker_schedule.hpp).
#include <algorithm>

#include "actors/core/shard_core.hpp"

namespace keel {

uint64_t shard_core::progress_clock() const {
  if (cfg_.rule.kind == consistency_kind::bsp || worker_clock_.empty())
    return bsp_clock_;
  return slowest_clock();
}

// The clock of the slowest worker still taking part: one that left has
// stopped for good, and one that has not joined yet starts at its step.
uint64_t shard_core::slowest_clock() const {
  if (!cfg_.workers.elastic())
    return *std::min_element(worker_clock_.begin(), worker_clock_.end());
  uint64_t slowest = UINT64_MAX, latest_end = 0;
  for (uint32_t w = 0; w < worker_clock_.size(); ++w) {
    auto span = cfg_.workers.span(w);
    latest_end = std::max(latest_end, std::min(span.end, worker_clock_[w]));
    if (worker_clock_[w] < span.end)
      slowest = std::min(slowest, worker_clock_[w]);
  }
  return slowest == UINT64_MAX ? latest_end : slowest;
}

void shard_core::raise_to_spans() {
  if (!cfg_.workers.elastic())
    return;
  const size_t n = std::min({applied_.size(), received_.size(), worker_clock_.size(), size_t{cfg_.workers.slots()}});
  for (uint32_t w = 0; w < n; ++w) {
    auto begin = cfg_.workers.span(w).begin;
    // A worker held in reserve never pushed: when a change lets it join,
    // its seqs and clock start at its join instead (worker_schedule.hpp).
    auto raise = [begin](uint64_t& x) { x = x >= reserve_step && begin < reserve_step ? begin : std::max(x, begin); };
    raise(applied_[w]);
    raise(received_[w]);
    raise(worker_clock_[w]);
  }
}

void shard_core::change_workers(const worker_schedule& workers) {
  cfg_.workers = workers;
  raise_to_spans();
}

bool shard_core::can_serve(uint64_t clock) const {
  switch (cfg_.rule.kind) {
    case consistency_kind::asp:
      return true;
    case consistency_kind::bsp:
      return bsp_clock_ >= clock;
    case consistency_kind::ssp:
      return slowest_clock() + cfg_.rule.staleness >= clock;
  }
  return false;
}

}  // namespace keel
