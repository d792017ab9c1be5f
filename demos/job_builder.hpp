#pragma once
// The part of a job's configuration that keel's commands choose by name:
// the model (loaded from the data directory), the consistency rule, the
// optimizer and its learning rate. `keel train` (and `keel cluster`, which
// runs it) and `keel chaos` build their job_config through it, so a model
// or rule is named, refused and loaded the same way everywhere. Bad usage is
// reported on stderr as every command reports it (demos/cli_flags.hpp).

#include <optional>
#include <string>

#include "actors/job/job.hpp"
#include "models/model_registry.hpp"

namespace keel::cli {

struct job_choices {
  std::string model = "mnist-mlp";
  std::string consistency = "bsp";  // bsp | ssp:S | asp
  std::string optimizer = "sgd";    // sgd | momentum | adagrad | adam
  std::optional<float> lr;          // default: default_lr(model)
  std::string eviction = "lru";     // lru | lfu (embedding tables with a capacity)
  std::string rules;                // per-parameter rules: NAME=OPTIMIZER[:LR],...
};

// Learning rates that train each of keel's models well with plain SGD at
// batch 32 per worker. Shards sum the workers' gradients (each push counts
// once), so the rate is per worker gradient.
float default_lr(const std::string& model);

// Sets cfg's model (made with `mo`), rule, optimizer and learning rate from
// `choices`. On failure it has printed one line on stderr and returns the
// exit status: 2 for a name that is not a model, rule, optimizer or eviction policy (naming
// the flag, as `keel COMMAND`), 1 for a model that cannot be loaded (its
// data missing, say).
std::optional<int> apply_choices(const job_choices& choices, const model_options& mo,
                                 const std::string& command, job_config& cfg);

}  // namespace keel::cli
