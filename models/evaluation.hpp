#pragma once
// The figures of quality a model reports on held-out data (evaluation), the
// bar a trained model should clear (quality_target) and the check of one
// against the other (meets). Plain values; models/model.hpp uses them.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel {

// One figure of quality a model reports as itself, e.g. {"mse", 0.0031} or
// {"auc", 0.79}. Names are lowercase words, digits and '_' (they become
// metric labels and JSON keys).
struct named_metric {
  std::string name;
  double value = 0;
};

// Quality on the held-out set. `log_loss` is the mean negative log
// likelihood in nats, set by probabilistic models; `accuracy` is set by
// classifiers; any other figure (a regression's MSE, a ranking's AUC, the
// probe's objective) goes into `metrics` under its own name.
struct evaluation {
  uint64_t examples = 0;
  std::optional<double> log_loss;
  std::optional<double> accuracy;
  std::vector<named_metric> metrics;

  // The figure called `name`: "log_loss", "accuracy" or one of `metrics`;
  // nullopt when the model did not report it.
  std::optional<double> metric(std::string_view name) const;
};

// A bound on one named figure (evaluation::metric): at least `min`, at most
// `max`, either or both.
struct metric_bound {
  std::string name;
  std::optional<double> min;
  std::optional<double> max;
};

// What a trained model should reach on its held-out set, and why.
struct quality_target {
  std::optional<double> min_accuracy;
  std::optional<double> max_log_loss;
  std::string basis;  // e.g. "plain single-thread SGD reaches 0.979"
  std::vector<metric_bound> bounds;  // bounds on any other named figure
};

// True if `e` meets every bound `t` sets (a target with no bound is met; a
// bound on a figure `e` does not report is not met).
bool meets(const evaluation& e, const quality_target& t);

}  // namespace keel
