// `keel plot REPORT.json -o run.svg`: draws the report `keel train --report`
// wrote as an SVG picture (demos/run_plot.hpp says what it shows). Exit
// status: 0 drawn, 1 the report cannot be read or the picture written (one
// line naming the file and the problem), 2 bad usage (also a REPORT that is
// not a regular file of at most 64 MiB: a FIFO or /dev/zero is refused at
// once).
#include <iostream>

#include "cli_flags.hpp"
#include "commands.hpp"
#include "run_plot.hpp"
#include "run_report.hpp"

namespace keel::cli {

int plot(const args& a) {
  std::string report_path, out_path;
  command_flags flags{"plot", po::options_description(), po::options_description(), {}};
  flags.visible.add_options()("help", "show this help")
    ("output,o", text_flag(&out_path, "FILE", false), "where the SVG goes (required: no default)");
  flags.hidden.add_options()("report", text_flag(&report_path, "REPORT", false), "the report");
  flags.positional.add("report", 1);
  po::variables_map vm;
  if (auto status = parse_flags(flags, a, vm))
    return *status;
  if (vm.count("help")) {
    print_help(std::cout, "keel plot REPORT.json -o FILE.svg",
               "Draws a run's report (keel train --report) as SVG: training loss and held-out\n"
               "accuracy over steps, a marker per fault, restart, rollback and checkpoint, and\n"
               "each recovery shaded. Exit status: 0 drawn, 1 unreadable report, 2 bad usage.",
               flags.visible);
    return 0;
  }
  if (report_path.empty())
    return usage_error("plot", "", "missing REPORT.json");
  if (out_path.empty())
    return usage_error("plot", "", "missing -o FILE.svg (where the picture goes)");
  // A FIFO, a device or a huge file is refused before it is opened.
  if (auto err = check_report_file(report_path))
    return usage_error("plot", "", error_text(err));
  auto report = read_report(report_path);
  if (!report) {
    std::cerr << "keel plot: " << error_text(report.error()) << "\n";
    return 1;
  }
  if (auto err = write_plot(*report, out_path)) {
    std::cerr << "keel plot: " << error_text(err) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace keel::cli
