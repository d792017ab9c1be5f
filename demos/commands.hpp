#pragma once
// The subcommands of the `keel` command-line program. Each takes the
// arguments after its name and returns the process exit status: 0 on
// success, 1 when the work itself failed (damage found, training failed),
// 2 for bad usage (an unknown flag, a missing argument).

#include <string>
#include <vector>

namespace keel::cli {

using args = std::vector<std::string>;

int inspect(const args& a);  // demos/inspect_command.cpp
int train(const args& a);    // demos/train_command.cpp
int chaos(const args& a);    // demos/chaos_command.cpp
int node(const args& a);     // demos/node_command.cpp

}  // namespace keel::cli
