#pragma once
// `keel train --resume DIR` continues a run with the flags it was started
// with: a fresh run records in DIR/keel-train.args (one per line) the flags
// that decide the run (model, layout, seed, consistency, optimizer,
// checkpointing, faults, data, limits: recorded_train_flag), and a resume
// reads them back, letting flags given again on the command line replace
// the recorded ones (e.g. a longer --timeout). What a checkpoint directory
// holds never chooses where keel writes or listens: output files
// (--report, --plot, --metrics-file), addresses and ports (--metrics-*)
// come from the command line alone, and a recorded file naming any flag
// but the recorded ones is refused, naming it (whoever can write DIR
// must not aim keel's outputs at another file or open a port). The file is
// read only when it is a regular file of at most 1 MiB in DIR itself, never
// through a link, and written through a fresh temporary file renamed over
// it. Flags are grouped by name: "--steps 60" and "--steps=60" are the
// same flag.

#include <filesystem>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace keel::cli {

inline constexpr const char* train_args_file = "keel-train.args";

// The largest keel-train.args a resume reads.
inline constexpr uint64_t max_train_args_bytes = uint64_t{1} << 20;

// Whether `flag` ("--seed") is one keel-train.args records: a flag that
// decides the run, never an output path, an address or a port.
bool recorded_train_flag(const std::string& flag);

// Records the recorded_train_flag flags of `args` (with their values) in
// dir/keel-train.args, atomically; the others are left out.
caf::error save_train_args(const std::filesystem::path& dir, const std::vector<std::string>& args);

// The recorded arguments of the run in `dir`. Errors name the file: missing
// (errc::not_found), not a regular file or a link, too large, unreadable,
// or holding a flag that is not a recorded one, or a line that is not a
// flag's value (errc::invalid_argument).
caf::expected<std::vector<std::string>> load_train_args(const std::filesystem::path& dir);

// `recorded` with every flag that `given` names replaced by `given`'s.
std::vector<std::string> merge_train_args(const std::vector<std::string>& recorded,
                                          const std::vector<std::string>& given);

}  // namespace keel::cli
