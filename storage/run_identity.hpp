#pragma once
// Which run a checkpoint belongs to. A run id is random at a run's fresh
// start and kept when the run resumes; the configuration is the text of
// everything that decides the run's result ("field=value" lines: model and
// its options, layout, seed, shards, workers, consistency, optimizer,
// batch), and its hash is what every snapshot carries. Every manifest
// carries all three, so a reader can name the field that differs. Files
// written by a keel from before run identities carry none (empty fields).
// Plain values and pure functions.

#include <string>

namespace keel {

struct run_identity {
  std::string run_id;       // 32 hex digits; empty: unknown (an old checkpoint)
  std::string config_hash;  // hex SHA-256 of `config`
  std::string config;       // "field=value\n" lines, in a fixed order

  bool empty() const { return run_id.empty(); }
};

// The fields whose values differ between two configurations' texts, as
// "seed (7 there, 1 here)" joined by "; " (`there`: the first text). Empty
// when they agree line for line.
std::string config_difference(const std::string& there, const std::string& here);

}  // namespace keel
