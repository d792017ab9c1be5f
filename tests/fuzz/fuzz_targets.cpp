#include "fuzz_targets.hpp"

namespace keel::fuzz {

const std::vector<fuzz_target>& all_targets() {
  static const std::vector<fuzz_target> targets = {
    {"fuzz_frame_decode", fuzz_one_frame_decode},
    {"fuzz_caf_deserialize", fuzz_one_caf_deserialize},
    {"fuzz_snapshot_file", fuzz_one_snapshot_file},
    {"fuzz_manifest_file", fuzz_one_manifest_file},
    {"fuzz_shard_messages", fuzz_one_shard_messages},
    {"fuzz_table_delta", fuzz_one_table_delta},
  };
  return targets;
}

}  // namespace keel::fuzz
