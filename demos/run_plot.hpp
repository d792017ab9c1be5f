#pragma once
// render_svg draws a run_report as a standalone SVG picture: training loss
// and held-out accuracy over steps in two stacked panels that share the step
// axis, with the run's faults, restarts, rollbacks, checkpoints and
// membership changes as
// vertical markers at their steps and each recovery (fault -> serving again)
// shaded. A checkpoint, and a fault triggered at a step, sit at their own
// step; other events carry only times: a time is mapped to a step by
// interpolating the progress series' (at_ms, step) points (the run's start
// and end included), clamped to the run. A report without progress points
// still plots, with the markers over time and a note saying so.
//
// The output is a pure function of the report (no clock, no files), so
// tests can parse and count it. Every marker is one element whose class
// says its kind: class="marker fault" (one per fault event: a kill, a lost
// message, a storage error), "marker restart", "marker rollback",
// "marker checkpoint", "marker membership" (a node joined or released, a
// plan's or an operator's drain, an operator's move); class="recovery"
// (one per recovery) for the shaded
// spans; the series are polylines of class "series loss" and
// "series accuracy" with one point per progress point that has the value.

#include <filesystem>
#include <string>

#include <caf/error.hpp>

#include "run_report.hpp"

namespace keel::cli {

struct plot_size {
  int width = 960;
  int height = 620;
};

// The SVG document (UTF-8 XML text) picturing `r`.
std::string render_svg(const run_report& r, const plot_size& size = {});

// Writes render_svg(r) to `path`; the error (io_error) names the file.
caf::error write_plot(const run_report& r, const std::filesystem::path& path);

}  // namespace keel::cli
