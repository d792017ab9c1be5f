#pragma once
// The subcommands of the `keel` command-line program. Each takes the
// arguments after its name and returns the process exit status: 0 on
// success, 1 when the work itself failed (damage found, training failed),
// 2 for bad usage (an unknown flag, a missing or bad value), which each
// reports in one line on stderr (demos/cli_flags.hpp).

#include <functional>
#include <string>
#include <vector>

#include "actors/job/placed_job.hpp"
#include "models/model_registry.hpp"

namespace keel::cli {

using args = std::vector<std::string>;

int inspect(const args& a);  // demos/inspect_command.cpp
int train(const args& a);    // demos/train_command.cpp
int cluster(const args& a);  // demos/cluster_command.cpp

// keel train's run with a last say over the job's configuration before it
// starts (keel cluster sets the placement and node faults); an error from
// `setup` ends the run with exit status 1.
using job_setup = std::function<caf::error(placed_job_config& cfg, const std::string& model_name,
                                           const model_options& mo)>;
int train_with(const args& a, const std::string& program, const job_setup& setup);
int chaos(const args& a);    // demos/chaos_command.cpp
int plot(const args& a);     // demos/plot_command.cpp
int node(const args& a);     // demos/node_command.cpp
int admin(const args& a);    // demos/admin_command.cpp

}  // namespace keel::cli
