#pragma once
// Builds validated pushes for shard tests.

#include <cstring>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "messages/decode.hpp"

namespace keel::test {

struct sparse_grad {
  std::vector<uint64_t> keys;
  std::vector<float> values;
};

inline decoded<schema::Push> make_push(uint32_t worker, uint64_t seq, uint64_t step, uint64_t begin,
                                       std::vector<float> dense, sparse_grad sparse = {}) {
  auto m = build<schema::Push>(256 + dense.size(), [&](schema::Push::Builder b) {
    b.setWorker(worker);
    b.setSeq(seq);
    b.setStep(step);
    if (!dense.empty()) {
      auto r = b.initDense(1)[0];
      r.setBegin(begin);
      r.setEnd(begin + dense.size());
      std::memcpy(r.initValues(dense.size() * 4).begin(), dense.data(), dense.size() * 4);
    }
    auto s = b.initSparse();
    auto k = s.initKeys(sparse.keys.size());
    auto v = s.initValues(sparse.values.size());
    for (unsigned i = 0; i < sparse.keys.size(); ++i) {
      k.set(i, sparse.keys[i]);
      v.set(i, sparse.values[i]);
    }
  });
  auto d = decode(m);
  REQUIRE_MESSAGE(d, describe(d.error()));
  return std::move(*d);
}

}  // namespace keel::test
