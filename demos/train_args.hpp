#pragma once
// `keel train --resume DIR` continues a run with the flags it was started
// with: a fresh run records its arguments in DIR/keel-train.args (one per
// line), and a resume reads them back, letting flags given again on the
// command line replace the recorded ones (e.g. a longer --timeout, another
// --report). Flags are grouped by name: "--steps 60" and "--steps=60" are
// the same flag.

#include <filesystem>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace keel::cli {

inline constexpr const char* train_args_file = "keel-train.args";

// Records `args` (without --resume and --checkpoint-dir, which the
// directory itself answers) in dir/keel-train.args, atomically.
caf::error save_train_args(const std::filesystem::path& dir, const std::vector<std::string>& args);

// The recorded arguments of the run in `dir` (an error names the file when
// it is missing or unreadable).
caf::expected<std::vector<std::string>> load_train_args(const std::filesystem::path& dir);

// `recorded` with every flag that `given` names replaced by `given`'s.
std::vector<std::string> merge_train_args(const std::vector<std::string>& recorded,
                                          const std::vector<std::string>& given);

}  // namespace keel::cli
