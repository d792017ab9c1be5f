#include "job_builder.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>

#include "cli_flags.hpp"
#include "messages/errors.hpp"

namespace keel::cli {

float default_lr(const std::string& model) {
  if (model == "probe")
    return 1.0f;  // the probe's pushes then add exactly 1.0 each
  if (model == "mnist-softmax")
    return 0.05f;
  if (model == "sparse-lr")
    return 0.2f;  // with --batch 64 and 2 epochs: within 5% of w*'s log loss
  if (model == "ctr-lr" || model == "ctr-fm")
    return 1.0f;  // the plain trainer's rate (ctr_plain_lr), meant for --optimizer adagrad
  return 0.1f;    // mnist-mlp: with its 5 default epochs, test accuracy >= 0.97
}

namespace {

// The options that decide model `name`'s data and shape (not where its
// files are): the run's model_options (job.hpp, training_config).
std::string options_text(const std::string& name, const model_options& mo) {
  std::ostringstream s;
  s.precision(17);
  if (name == "mnist-mlp" || name == "mnist-softmax")
    s << "train_limit " << mo.mnist_limits.train << " test_limit " << mo.mnist_limits.test;
  else if (name == "sparse-lr") {
    auto& c = mo.sparse_lr;
    s << "seed " << c.seed << " keys " << c.keys << " train_rows " << c.train_rows << " test_rows "
      << c.test_rows << " features " << c.min_features << ".." << c.max_features << " zipf " << c.zipf_exponent
      << " weight_scale " << c.weight_scale << " weight_half_rank " << c.weight_half_rank << " true_bias "
      << c.true_bias;
  } else if (name == "ctr-lr" || name == "ctr-fm") {
    auto& c = mo.ctr;
    s << "seed " << c.seed << " vocabulary " << c.vocabulary << " train_examples " << c.train_examples
      << " test_examples " << c.test_examples << " zipf " << c.zipf_exponent << " fm_factors " << c.fm_factors
      << " planted_factors " << c.planted_factors << " weight_scale " << c.weight_scale << " factor_scale "
      << c.factor_scale << " weight_half_rank " << c.weight_half_rank << " numeric_scale " << c.numeric_scale
      << " true_bias " << c.true_bias;
  } else if (name == "probe") {
    auto& c = mo.probe;
    s << "dense_keys " << c.dense_keys << " sparse_keys " << c.sparse_keys << " examples " << c.examples
      << " lr " << c.lr;
    if (c.table_keys > 0)
      s << " table_keys " << c.table_keys << " table_pool " << c.table_pool;
  }
  return s.str();
}

}  // namespace

std::optional<int> apply_choices(const job_choices& choices, const model_options& mo,
                                 const std::string& command, job_config& cfg) {
  auto rule = parse_consistency(choices.consistency);
  if (!rule)
    return usage_error(command, "--consistency", error_text(rule.error()));
  cfg.training.rule = *rule;
  auto opt = parse_optimizer(choices.optimizer);
  if (!opt)
    return usage_error(command, "--optimizer", error_text(opt.error()));
  cfg.training.optimizer.kind = *opt;
  auto eviction = parse_eviction_policy(choices.eviction);
  if (!eviction)
    return usage_error(command, "--table-eviction", "'" + choices.eviction + "': say lru or lfu");
  if (*eviction != eviction_policy::least_recently_updated && cfg.training.tables.capacity_rows == 0)
    return usage_error(command, "--table-eviction", "needs --table-capacity: without a capacity no row is evicted");
  cfg.training.tables.eviction = *eviction;
  auto model = make_model(choices.model, mo);
  if (!model) {
    auto known = model_names();
    if (std::find(known.begin(), known.end(), choices.model) == known.end())
      return usage_error(command, "--model", error_text(model.error()));
    std::cerr << "keel " << command << ": " << describe(model.error()) << "\n";
    return 1;
  }
  cfg.training_model = *model;
  if ((*model)->layout().tables().empty()) {
    if (cfg.training.tables.capacity_rows > 0)
      return usage_error(command, "--table-capacity", "is for models with embedding tables, and " + choices.model +
                                                          " has none (ctr-lr and ctr-fm have)");
    if (cfg.training.tables.admit_after > 1)
      return usage_error(command, "--admit-after", "is for models with embedding tables, and " + choices.model +
                                                       " has none (ctr-lr and ctr-fm have)");
  }
  cfg.training.model_options = options_text(choices.model, mo);
  cfg.training.optimizer.lr = choices.lr ? *choices.lr : default_lr(choices.model);
  if (!choices.rules.empty()) {
    auto rules = parse_rules(choices.rules, cfg.training.optimizer);
    if (!rules)
      return usage_error(command, "--rules", error_text(rules.error()));
    cfg.training.rules = std::move(*rules);
  }
  return std::nullopt;
}

}  // namespace keel::cli
