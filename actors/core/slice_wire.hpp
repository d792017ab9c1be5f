#pragma once
// What a coordinator and a worker exchange to score a held-out slice
// (actors/job/slice_dispatch.hpp, actors/ps/worker.hpp): the request
// (score_atom, slice_task) and its answer, a slice_score: the slice's
// partial_evaluation in a form CAF carries between processes (registered by
// actors/cluster/node_protocol.cpp). Converting back checks what a wire
// can break: the slice it answers, the counts, the histogram's bins.

#include <caf/expected.hpp>
#include <caf/meta/type_name.hpp>
#include <cstdint>
#include <vector>

#include "models/model.hpp"
#include "models/partial_evaluation.hpp"

namespace keel {

// Score test examples [first, first + count) with these dense parameters
// (every dense key; the rows come from the shards).
struct slice_task {
  uint64_t first = 0;
  uint64_t count = 0;
  std::vector<float> dense;
};

struct slice_score {
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t examples = 0;
  uint64_t correct = 0;
  uint64_t non_finite = 0;
  uint64_t loss_high = 0;  // fixed_sum's words
  uint64_t loss_low = 0;
  std::vector<uint32_t> bin_keys;  // score_histogram's bins, keys ascending
  std::vector<uint64_t> bin_positives;
  std::vector<uint64_t> bin_negatives;
};

slice_score to_wire(test_slice slice, const partial_evaluation& part);

// The partial evaluation `s` carries, if it answers `slice`; else
// invalid_field naming what is wrong (another slice, more examples than the
// slice holds, bins of unequal lengths or out of order).
caf::expected<partial_evaluation> from_wire(const slice_score& s, test_slice slice);

// The field order is the wire format.
template <class I>
typename I::result_type inspect(I& f, slice_task& x) {
  return f(caf::meta::type_name("keel.slice_task"), x.first, x.count, x.dense);
}

template <class I>
typename I::result_type inspect(I& f, slice_score& x) {
  return f(caf::meta::type_name("keel.slice_score"), x.first, x.count, x.examples, x.correct, x.non_finite,
           x.loss_high, x.loss_low, x.bin_keys, x.bin_positives, x.bin_negatives);
}

}  // namespace keel
