#pragma once
// model_options (model_registry.hpp) as a CAF message field, so a process
// can ask another to build one of keel's models by name: the cluster
// protocol sends a model's name and its options and names no model itself.
// `data_dir` is a path on the sending host and is not sent; the receiver
// fills it in. Floating-point settings cross as their bit patterns
// (messages/wire_bits.hpp).

#include <caf/meta/type_name.hpp>

#include "messages/wire_bits.hpp"
#include "models/model_registry.hpp"

namespace keel {

template <class I>
typename I::result_type inspect(I& f, example_limits& x) {
  return f(caf::meta::type_name("keel.example_limits"), x.train, x.test);
}
template <class I>
typename I::result_type inspect(I& f, sparse_lr_config& x) {
  using wire::bits;
  return f(caf::meta::type_name("keel.sparse_lr_config"), x.seed, x.keys, x.train_rows, x.test_rows,
           x.min_features, x.max_features, bits(x.zipf_exponent), bits(x.weight_scale),
           bits(x.weight_half_rank), bits(x.true_bias));
}
template <class I>
typename I::result_type inspect(I& f, probe_config& x) {
  return f(caf::meta::type_name("keel.probe_config"), x.dense_keys, x.sparse_keys, x.examples,
           wire::bits(x.lr), x.table_keys, x.table_pool);
}
template <class I>
typename I::result_type inspect(I& f, ctr_config& x) {
  using wire::bits;
  return f(caf::meta::type_name("keel.ctr_config"), x.seed, x.vocabulary, x.train_examples,
           x.test_examples, bits(x.zipf_exponent), x.fm_factors, x.planted_factors,
           bits(x.weight_scale), bits(x.factor_scale), bits(x.weight_half_rank),
           bits(x.numeric_scale), bits(x.true_bias));
}
template <class I>
typename I::result_type inspect(I& f, model_options& x) {
  return f(caf::meta::type_name("keel.model_options"), x.mnist_limits, x.sparse_lr, x.probe,
           x.ctr);
}

}  // namespace keel
