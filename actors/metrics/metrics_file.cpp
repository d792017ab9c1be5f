#include "actors/metrics/metrics_file.hpp"

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "actors/metrics/metrics.hpp"

namespace keel {

struct metrics_file_writer::impl {
  metrics_file_options options;
  const metrics_registry* registry = nullptr;
  std::ofstream out;
  std::mutex mtx;
  std::condition_variable wake;
  bool stopping = false;
  bool closed = false;
  std::string write_error;  // the first failed write
  std::thread thread;

  void append() {
    auto line = to_json_line(registry->families(), options.clock_ms()) + "\n";
    out << line << std::flush;
    if (!out && write_error.empty())
      write_error =
          "metrics file " + options.path.string() + ": write failed: " + std::strerror(errno);
  }

  void run() {
    std::unique_lock<std::mutex> lock(mtx);
    while (!wake.wait_for(lock, options.every, [&] { return stopping; })) append();
  }
};

std::unique_ptr<metrics_file_writer> metrics_file_writer::open(metrics_file_options options,
                                                               const metrics_registry& registry,
                                                               std::string& error) {
  if (options.every.count() < 1) {
    error = "metrics file: the interval must be at least 1 ms, not " +
            std::to_string(options.every.count());
    return nullptr;
  }
  auto p = std::make_unique<impl>();
  p->options = std::move(options);
  if (!p->options.clock_ms)
    p->options.clock_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  p->registry = &registry;
  errno = 0;
  p->out.open(p->options.path, std::ios::out | std::ios::app);
  if (!p->out) {
    error = "metrics file " + p->options.path.string() + ": cannot open for appending" +
            (errno ? std::string(": ") + std::strerror(errno) : std::string());
    return nullptr;
  }
  auto* raw = p.get();
  p->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<metrics_file_writer>(new metrics_file_writer(std::move(p)));
}

metrics_file_writer::metrics_file_writer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

bool metrics_file_writer::close(std::string& error) {
  auto& j = *impl_;
  {
    std::lock_guard<std::mutex> lock(j.mtx);
    if (j.closed)
      return true;
    j.closed = true;
    j.stopping = true;
  }
  j.wake.notify_all();
  j.thread.join();
  j.append();
  j.out.close();
  if (!j.write_error.empty()) {
    error = j.write_error;
    return false;
  }
  return true;
}

metrics_file_writer::~metrics_file_writer() {
  std::string ignored;
  close(ignored);
}

}  // namespace keel
