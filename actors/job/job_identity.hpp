#pragma once
// A job's run identity (storage/run_identity.hpp): the text of the
// configuration that decides its result, its hash, and the run id, random
// at a fresh start and read back from the checkpoint directory on resume.
// Checkpoints of another run or another configuration are refused by name:
// which run, which field. Not part of the public API.

#include <string>

#include <caf/expected.hpp>

#include "actors/job/job.hpp"
#include "storage/run_identity.hpp"

namespace keel {

class snapshot_store;

// "field=value" lines: model, model_options, layout, seed, shards,
// workers, consistency, optimizer, batch (and combine when mean).
std::string run_configuration(const job_config& cfg);

// The identity a job starts with. A fresh start: a new random run id. A
// resume: the run id of the checkpoints in `store`, which must all be of
// one run and of this configuration; else an error naming the directory,
// the run(s) and the fields that differ. Checkpoints without an identity
// (a keel from before them) are refused: their run cannot be told.
caf::expected<run_identity> starting_identity(const job_config& cfg, const snapshot_store& store);

// Whether a checkpoint (`found`, described by `where`) is this run's
// (`ours`): the same run id and configuration hash; else an error naming
// both runs and the fields that differ.
caf::error check_same_run(const run_identity& ours, const run_identity& found, const std::string& where);

}  // namespace keel
