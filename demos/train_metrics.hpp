#pragma once
// The metrics side of `keel train`: its flags (--metrics-port,
// --metrics-address, --metrics-file, --metrics-every-ms) and, while a job
// runs, a metrics_registry fed by the job's events, served over HTTP and/or
// appended to a file as JSON lines. Nothing runs unless a flag asks for it.
// Errors are one line of text naming the flag or file at fault.

#include <boost/program_options.hpp>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "actors/metrics/metrics.hpp"
#include "actors/metrics/metrics_file.hpp"
#include "actors/metrics/metrics_http.hpp"

namespace keel::cli {

class train_metrics {
 public:
  void add_options(boost::program_options::options_description& opts);

  // After the flags are parsed: checks them, starts the server (printing
  // its URL to `out`) and the file writer. Returns "" or the error.
  std::string start(std::ostream& out);

  // Whether any metrics flag was given.
  bool enabled() const { return serve_ || !file_.empty(); }

  // Called from the job's on_event.
  void observe(const job_event& e) { registry_.observe(e); }

  // The job ended with the result `s` summarises, or without a result
  // (nullptr). Writes the file's last line and closes it; returns "" or the
  // write error.
  std::string finish(const job_summary* s);

 private:
  metrics_registry registry_;
  bool serve_ = false;  // --metrics-port was given
  uint32_t port_ = 0;
  std::string address_ = "127.0.0.1";
  std::string file_;
  uint64_t every_ms_ = 1000;
  std::unique_ptr<metrics_http_server> server_;
  std::unique_ptr<metrics_file_writer> writer_;
};

}  // namespace keel::cli
