#include "models/evaluation.hpp"

namespace keel {

std::optional<double> evaluation::metric(std::string_view name) const {
  if (name == "log_loss")
    return log_loss;
  if (name == "accuracy")
    return accuracy;
  for (auto& m : metrics)
    if (m.name == name)
      return m.value;
  return std::nullopt;
}

bool meets(const evaluation& e, const quality_target& t) {
  if (t.min_accuracy && (!e.accuracy || *e.accuracy < *t.min_accuracy))
    return false;
  if (t.max_log_loss && !(e.log_loss && *e.log_loss <= *t.max_log_loss))
    return false;
  for (auto& b : t.bounds) {
    auto v = e.metric(b.name);
    // NaN fails both comparisons, so a diverged figure never meets a bound.
    if (!v || (b.min && !(*v >= *b.min)) || (b.max && !(*v <= *b.max)))
      return false;
  }
  return true;
}

}  // namespace keel
