#pragma once
// The settings of keel's own models, as plain values: what make_model
// (model_registry.hpp) reads from model_options. Part of the public API;
// no implementation types.

#include <cstdint>

namespace keel {

// Load only a prefix of each split of a dataset (0 = all): small runs and tests.
struct example_limits {
  uint64_t train = 0;
  uint64_t test = 0;
};

// The synthetic sparse logistic regression (models/sparse_lr.hpp): rows are
// a function of (seed, row), so every worker computes its own data.
struct sparse_lr_config {
  uint64_t seed = 1;                  // data seed: w*, every row and the key scatter
  uint64_t keys = uint64_t{1} << 20;  // size of the sparse key space
  uint64_t train_rows = 500'000;      // rows [0, train_rows) train
  uint64_t test_rows = 20'000;        // rows [train_rows, train_rows + test_rows) test
  uint32_t min_features = 20;         // active features a row, drawn uniformly
  uint32_t max_features = 200;        //   from [min_features, max_features] (<= 1024)
  double zipf_exponent = 1.0;         // s, in [0.5, 1.5]
  double weight_scale = 0.8;          // w* = weight_scale * z / sqrt(1 + rank / half_rank)
  double weight_half_rank = 100;      // rank where a key's weight scale has fallen by sqrt(2)
  double true_bias = -0.5;            // b*
};

// The synthetic click log and its models ctr-lr and ctr-fm
// (models/ctr_data.hpp, models/ctr_model.hpp): example `row` is a function
// of (seed, row), so every worker generates its own data. Labels come from
// a planted model: logit = true_bias + numeric terms + a weight per
// categorical ID + pairwise factorization terms between the fields.
struct ctr_config {
  uint64_t seed = 1;                   // data seed: every example and the planted model
  uint64_t vocabulary = 10'000'000;    // IDs per categorical field, Zipf-distributed
  uint64_t train_examples = 1'000'000;  // rows [0, train_examples) train
  uint64_t test_examples = 100'000;    // the next test_examples rows are held out
  double zipf_exponent = 1.05;         // s of P(rank k) ~ k^-s, in [0.5, 2]
  uint32_t fm_factors = 16;            // ctr-fm's factors: its rows are 1 + fm_factors floats
  uint32_t planted_factors = 4;        // factors of the planted pairwise terms (0..16)
  double weight_scale = 0.3;           // planted ID weight: weight_scale * z / sqrt(1 + id / half_rank)
  double factor_scale = 0.1;           // planted factor: factor_scale * z / (1 + id / half_rank)^(1/4)
  double weight_half_rank = 2000;      // ID (rank - 1) where the planted scales have fallen
  double numeric_scale = 0.25;         // planted numeric weight: numeric_scale * z
  double true_bias = -0.9;             // the planted logit's constant
};

// The probe (models/probe_model.hpp): every push adds exactly 1.0 to every
// parameter, so the final parameters count the pushes applied.
struct probe_config {
  uint64_t dense_keys = 1000;  // "probe.dense" [dense_keys]
  uint64_t sparse_keys = 8;    // "probe.sparse": a few sparse keys, all in every batch
  uint64_t examples = 1024;    // training examples (they carry no data)
  float lr = 1.0f;             // the SGD learning rate the shards apply
  // "probe.table" (rows of probe_table_dim): the rows a batch touches, drawn
  // from a pool of table_pool 64-bit keys (0: no table, the default).
  uint64_t table_keys = 0;
  uint64_t table_pool = 256;
};

}  // namespace keel
