#include "job_builder.hpp"

#include <algorithm>
#include <iostream>

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
  return 0.1f;    // mnist-mlp: with its 5 default epochs, test accuracy >= 0.97
}

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
  auto model = make_model(choices.model, mo);
  if (!model) {
    auto known = model_names();
    if (std::find(known.begin(), known.end(), choices.model) == known.end())
      return usage_error(command, "--model", error_text(model.error()));
    std::cerr << "keel " << command << ": " << describe(model.error()) << "\n";
    return 1;
  }
  if (!(*model)->layout().tables().empty()) {
    // The shards do not hold embedding tables yet (issue 26): say so rather
    // than start a job whose workers cannot pull the model's rows.
    std::cerr << "keel " << command << ": " << choices.model
              << " keeps its parameters in embedding tables, which keel's shards do not serve "
                 "yet; train it with the plain trainer (build/bench/training/ctr_plain_bench)\n";
    return 1;
  }
  cfg.training_model = *model;
  cfg.training.optimizer.lr = choices.lr ? *choices.lr : default_lr(choices.model);
  return std::nullopt;
}

}  // namespace keel::cli
