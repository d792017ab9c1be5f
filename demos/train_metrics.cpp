#include "train_metrics.hpp"

#include "cli_flags.hpp"

#include "actors/job/job_summary.hpp"

namespace po = boost::program_options;

namespace keel::cli {

void train_metrics::add_options(po::options_description& opts) {
  // clang-format off
  opts.add_options()
    ("metrics-port", number_flag<uint32_t>(&port_, "PORT", 0, 65535, false)
                       ->notifier([this](uint32_t) { serve_ = true; }),
     "serve Prometheus metrics at http://ADDRESS:PORT/metrics while training (0: the OS picks)")
    ("metrics-address", text_flag(&address_, "IP"), "the address --metrics-port binds")
    ("metrics-file", text_flag(&file_, "FILE", false),
     "append the metrics as a JSON line every --metrics-every-ms, and a last one at the end")
    ("metrics-every-ms", number_flag<uint64_t>(&every_ms_, "MS", 1, 3600000),
     "milliseconds between --metrics-file lines");
  // clang-format on
}

std::string train_metrics::start(std::ostream& out) {
  if (serve_ && port_ > 65535)
    return "--metrics-port must be 0..65535, not " + std::to_string(port_);
  if (every_ms_ == 0 || every_ms_ > 86400000)
    return "--metrics-every-ms must be 1..86400000, not " + std::to_string(every_ms_);
  std::string error;
  if (serve_) {
    metrics_http_options o;
    o.address = address_;
    o.port = static_cast<uint16_t>(port_);
    server_ = metrics_http_server::start(
        o, [this] { return to_prometheus(registry_.families()); }, error);
    if (!server_)
      return error;
    auto host = address_.find(':') == std::string::npos ? address_ : "[" + address_ + "]";
    out << "keel train: metrics on http://" << host << ":" << server_->port() << "/metrics"
        << std::endl;
  }
  if (!file_.empty()) {
    metrics_file_options o;
    o.path = file_;
    o.every = std::chrono::milliseconds(every_ms_);
    writer_ = metrics_file_writer::open(o, registry_, error);
    if (!writer_)
      return error;
  }
  return {};
}

std::string train_metrics::finish(const job_summary* s) {
  if (s)
    registry_.finish(*s);
  else
    registry_.fail();
  std::string error;
  if (writer_ && !writer_->close(error))
    return error;
  return {};
}

}  // namespace keel::cli
