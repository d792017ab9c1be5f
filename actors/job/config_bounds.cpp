// The one check of a job's configuration against config_bounds
// (config_bounds.hpp).
#include "actors/job/config_bounds.hpp"

#include <cmath>
#include <sstream>
#include <type_traits>

#include "actors/job/job.hpp"

namespace keel {

namespace {

template <class T>
std::string text(T v) {
  std::ostringstream out;
  out << +v;  // + : a uint8_t would print as a character
  return out.str();
}

// Why `v` is outside `b` (or, a float, not finite), or nullopt; `unit`
// follows each number ("", " ms").
template <class T>
std::optional<std::string> outside(T v, bound<T> b, const char* unit) {
  if constexpr (std::is_floating_point_v<T>)
    if (!std::isfinite(v))
      return text(v) + " is not a finite number";
  if (v < b.min)
    return text(v) + unit + " is too small (at least " + text(b.min) + unit + ")";
  if (v > b.max)
    return text(v) + unit + " is too large (at most " + text(b.max) + unit + ")";
  return std::nullopt;
}

// The first problem among the checks, in order.
struct checks {
  std::optional<config_problem> found;

  template <class T>
  checks& operator()(const std::string& field, T v, bound<T> b, const char* unit = "") {
    if (!found)
      if (auto why = outside(v, b, unit))
        found = config_problem{field, *why};
    return *this;
  }

  checks& ms(const std::string& field, std::chrono::milliseconds v, bound<int64_t> b) {
    return (*this)(field, static_cast<int64_t>(v.count()), b, " ms");
  }

  // A float with no bound but finiteness.
  checks& finite(const std::string& field, float v) {
    return (*this)(field, v, bound<float>{-INFINITY, INFINITY});
  }

  checks& optimizer(const std::string& field, const optimizer_config& o) {
    (*this)(field + ".lr", o.lr, config_bounds::lr);
    for (auto [name, v] : {std::pair{".momentum", o.momentum},
                           {".beta1", o.beta1},
                           {".beta2", o.beta2},
                           {".epsilon", o.epsilon},
                           {".initial_accumulator", o.initial_accumulator}})
      finite(field + name, v);
    return *this;
  }
};

}  // namespace

std::optional<config_problem> check_bounds(const job_config& c) {
  namespace b = config_bounds;
  auto& t = c.training;
  checks check;
  check("training.shards", t.shards, b::shards)("training.workers", t.workers, b::workers)(
      "training.batch_size", t.batch_size, b::batch_size)("training.steps", t.steps, b::steps);
  check.optimizer("training.optimizer", t.optimizer);
  for (auto& [name, rule] : t.rules) check.optimizer("training.rules[" + name + "]", rule);
  check("training.tables.capacity_rows", t.tables.capacity_rows, b::table_capacity_rows);
  auto& inc = c.checkpoints.incremental;
  check("checkpoints.incremental.full_every", inc.full_every, b::checkpoint_full_every)(
      "checkpoints.incremental.delta_fraction", inc.delta_fraction, b::checkpoint_delta_fraction);
  check.ms("recovery.request_timeout", c.recovery.request_timeout, b::request_timeout_ms)
      .ms("checkpoints.storage_deadline", c.checkpoints.storage_deadline, b::storage_deadline_ms)
      .ms("recovery.stall_timeout", c.recovery.stall_timeout, b::stall_timeout_ms);
  return check.found;
}

}  // namespace keel
