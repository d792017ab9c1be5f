#pragma once
// What `keel train` (and `keel cluster`, which runs the same job over nodes)
// prints of a run: its events as they come, and its result's lines.

#include <functional>
#include <string>

#include "actors/job/job.hpp"
#include "actors/job/job_summary.hpp"

namespace keel::cli {

// Prints the run's events as they come: progress lines, and (unless
// `verbose`) only the events that are not routine; failed checkpoints go to
// stderr.
std::function<void(const job_event&)> event_printer(bool verbose);

// The result's lines, read from its summary `s` (time, throughput,
// restarts, quality, pushes acked and applied, the parameters' digest,
// tables, faults, checkpoints; recoveries unless `quiet`), and for the probe
// model its exactly-once check of the final parameters in `r`. Returns 1 if
// that check failed, else 0.
int print_result(const job_config& cfg, const job_result& r, const job_summary& s, const std::string& program,
                 bool quiet);

}  // namespace keel::cli
