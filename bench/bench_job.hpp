#pragma once
// Running a whole keel job in a bench: started, waited for (an hour at most)
// and let go before its result is returned, so the caller may remove its
// checkpoint directory at once; any error ends the program, named by
// `program` (bench_common.hpp's fail).
#include <chrono>

#include "actors/keel.hpp"
#include "bench/bench_common.hpp"

namespace keel::bench {

inline job_result run_job_to_end(const job_config& cfg, const char* program) {
  auto j = job::start(cfg);
  if (!j)
    fail(program, "keel", j.error());
  auto r = (*j)->wait(std::chrono::hours(1));
  if (!r)
    fail(program, "keel", r.error());
  j->reset();
  return std::move(*r);
}

}  // namespace keel::bench
