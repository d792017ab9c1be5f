#pragma once
// A metrics_file_writer appends the metrics of a registry to a file as JSON
// lines (to_json_line): one every interval from a thread of its own, and a
// last one, with the final numbers, when it is closed. Lines are appended
// whole and flushed, so a reader tailing the file sees complete lines. The
// registry must outlive the writer. A write that fails is remembered and
// reported by close(); the writer never throws and never blocks its owner
// longer than one line's write.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace keel {

class metrics_registry;

struct metrics_file_options {
  std::filesystem::path path;
  std::chrono::milliseconds every{1000};  // at least 1 ms
  // Milliseconds since the Unix epoch, stamped on each line as time_ms;
  // empty: the system clock.
  std::function<int64_t()> clock_ms;
};

class metrics_file_writer {
 public:
  // Opens options.path for appending (creating it) and starts the thread,
  // or returns nullptr and sets `error` naming the path and the reason.
  static std::unique_ptr<metrics_file_writer> open(metrics_file_options options,
                                                   const metrics_registry& registry,
                                                   std::string& error);

  // Stops the thread and appends the last line. Returns false and sets
  // `error` if any line could not be written. Once only; later calls
  // return true and write nothing.
  bool close(std::string& error);

  // Closes, if close() was not called; a write error is then lost.
  ~metrics_file_writer();
  metrics_file_writer(const metrics_file_writer&) = delete;
  metrics_file_writer& operator=(const metrics_file_writer&) = delete;

  struct impl;

 private:
  explicit metrics_file_writer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace keel
