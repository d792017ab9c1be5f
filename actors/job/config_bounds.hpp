#pragma once
// The bounds a job's configuration (job_config, job.hpp) is held to, and the
// one check of them. job::start runs it first, so every way into a job (a C++
// embedder, the Python module, keel's commands) refuses the same values, and
// before anything is allocated for them: a job of 10^9 workers is refused,
// not started. A refusal names the field by its path in job_config
// ("training.workers") and says why ("1000000000 is too large (at most
// 1024)"); keel's commands declare their flags with the same bounds and map a
// field back to the flag that sets it. Plain values, no actors.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace keel {

struct job_config;

// A closed range [min, max] of one numeric field.
template <class T>
struct bound {
  T min;
  T max;
};

namespace config_bounds {
inline constexpr bound<uint32_t> shards{1, 1024};
inline constexpr bound<uint32_t> workers{1, 1024};
inline constexpr bound<uint32_t> batch_size{1, 1u << 20};
inline constexpr bound<uint64_t> steps{1, uint64_t{1} << 40};
// Every learning rate: the job's optimizer's and each per-parameter rule's
// (finite, too).
inline constexpr bound<float> lr{0.0f, 1e6f};
inline constexpr bound<uint64_t> table_capacity_rows{0, 4294967294ull};
inline constexpr bound<uint32_t> checkpoint_full_every{1, 1u << 20};
inline constexpr bound<double> checkpoint_delta_fraction{0.0, 1000.0};
inline constexpr bound<int64_t> request_timeout_ms{1, 3600000};
inline constexpr bound<int64_t> storage_deadline_ms{1, int64_t{7} * 24 * 3600 * 1000};
// 0: derived (stall_timeout_for, job.hpp).
inline constexpr bound<int64_t> stall_timeout_ms{0, 3600000};
}  // namespace config_bounds

// A value of a job's configuration outside its bound.
struct config_problem {
  std::string field;  // its path in job_config: "training.workers", "training.rules[fc1.weight].lr"
  std::string why;    // "1000000000 is too large (at most 1024)", "nan is not a finite number"
};

// The first value of `c` outside config_bounds (or, for a float, not
// finite), in the order of the fields above; nullopt when all are inside.
std::optional<config_problem> check_bounds(const job_config& c);

}  // namespace keel
