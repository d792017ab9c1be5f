#pragma once
// What an application's own training loop exchanges with keel through a
// ps_client (actors/job/ps_client.hpp): the keys it pulls for a step, and
// the parameters that pull returns. Plain values.

#include <cstdint>
#include <vector>

#include "models/model.hpp"

namespace keel {

// The keys of one step's pull beside every dense key (always pulled):
// sparse keys of the layout's sparse space, ascending and below its
// sparse_key_count, and for each embedding table of the layout, in layout
// order, the rows' 64-bit keys, ascending and distinct (an empty list for a
// table the step does not touch; no lists for a model without tables).
struct step_keys {
  std::vector<uint64_t> sparse;
  table_key_lists tables;
};

// The parameters of one step, as the shards served them at the step's
// clock: every dense key (dense[k] is key k; ps_client::tensor finds a
// tensor's part by name), the sparse values aligned with sparse_keys, and
// per table the rows of the keys asked for, in the order asked (dim floats
// a key). Immutable once made; shared without a copy.
struct pulled_step {
  pulled_step(uint64_t at, const parameter_view& v) : step(at), dense(v.dense.begin(), v.dense.end()),
      sparse_keys(v.sparse_keys.begin(), v.sparse_keys.end()),
      sparse_values(v.sparse_values.begin(), v.sparse_values.end()) {
    for (auto& t : v.tables) {
      table_keys.emplace_back(t.keys.begin(), t.keys.end());
      table_rows.emplace_back(t.rows.begin(), t.rows.end());
    }
    for (size_t t = 0; t < table_keys.size(); ++t) views_.push_back({table_keys[t], table_rows[t]});
  }
  pulled_step(const pulled_step&) = delete;  // views_ points into this one
  pulled_step& operator=(const pulled_step&) = delete;

  uint64_t step;
  std::vector<float> dense;
  std::vector<uint64_t> sparse_keys;
  std::vector<float> sparse_values;
  table_key_lists table_keys;
  std::vector<std::vector<float>> table_rows;

  // The step's parameters as a model's gradient() reads them; valid while
  // this pulled_step lives.
  parameter_view view() const {
    return {dense, sparse_keys, sparse_values, span<const keel::table_rows>(views_.data(), views_.size())};
  }

 private:
  std::vector<keel::table_rows> views_;
};

}  // namespace keel
