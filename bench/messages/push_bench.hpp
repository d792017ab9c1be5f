#pragma once
// Shared pieces of the push benchmark: building a push of n floats and
// timing helpers. See push_bench.cpp for what is measured.

#include <chrono>
#include <cstring>
#include <vector>

#include <caf/all.hpp>

#include "messages/decode.hpp"

namespace keel::bench {

// Builds a push whose values are adopted from `grad` (no copy): the worker's
// hot path, where the model writes its gradient into a pooled buffer.
inline push_msg adopt_push(pooled_buffer grad, size_t floats, uint64_t seq) {
  frame_builder fb(64);
  auto b = fb.message().initRoot<schema::Push>();
  b.setVersion(schema::PROTOCOL_VERSION);
  b.setWorker(0);
  b.setSeq(seq);
  auto r = b.initDense(1)[0];
  r.setBegin(0);
  r.setEnd(floats);
  r.adoptValues(fb.adopt_data(std::move(grad), floats * 4));
  return push_msg(fb.finish());
}

// Builds a push by copying `grad` into it, as a worker does
// (worker_core::make_push: frame_builder::copy_data, one pass).
inline push_msg make_push(const std::vector<float>& grad, uint64_t seq) {
  frame_builder fb(64);
  auto b = fb.message().initRoot<schema::Push>();
  b.setVersion(schema::PROTOCOL_VERSION);
  b.setWorker(0);
  b.setSeq(seq);
  b.setStep(seq - 1);
  auto r = b.initDense(1)[0];
  r.setBegin(0);
  r.setEnd(grad.size());
  r.adoptValues(fb.copy_data(grad.data(), grad.size() * 4));
  return push_msg(fb.finish());
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Decodes (validating every value) and answers with a sample sum of the
// values, so the decode cannot be optimised away.
inline caf::behavior sink(decode_limits limits = {}) {
  return {[limits](const push_msg& m) -> caf::result<double> {
    auto d = decode(m, limits);
    if (!d)
      return d.error();
    auto v = d->root().getDense()[0].getValues();
    double s = 0;
    for (size_t i = 0; i + 4 <= v.size(); i += 4096) {
      float f;
      std::memcpy(&f, v.begin() + i, 4);
      s += f;
    }
    return s;
  }};
}

struct remote_figures {
  double keel_gbps = 0;
  double tcp_gbps = 0;
};

// Runs the two-process part: forks a server, measures keel pushes through
// CAF's middleman and a raw TCP transfer of the same bytes.
remote_figures run_remote(size_t floats, size_t pushes);

}  // namespace keel::bench
