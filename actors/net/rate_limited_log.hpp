#pragma once
// A rate_limited_log passes at most `burst` lines per `window` to its sink
// and counts the rest; when a window that dropped lines has passed, the
// next call (or `flush`) writes one line saying how many were dropped. It
// bounds what a flood of refused connections costs in log volume while
// every refusal is still counted. Time is passed in, so tests need no
// clock. Not thread-safe: one owner (the thread that refuses) calls it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace keel {

class rate_limited_log {
 public:
  using clock = std::chrono::steady_clock;

  // `what` names the dropped lines in the summary ("refusals").
  rate_limited_log(std::function<void(const std::string&)> sink, size_t burst,
                   std::chrono::milliseconds window, std::string what);

  // Writes `line` unless `burst` lines were written in the current window.
  void operator()(const std::string& line, clock::time_point now);

  // Writes the summary of a finished window that dropped lines, if any.
  void flush(clock::time_point now);

  // When flush has something to write (max() when nothing was dropped).
  clock::time_point next_flush() const;

  uint64_t dropped_total() const { return dropped_total_; }

 private:
  std::function<void(const std::string&)> sink_;
  size_t burst_;
  std::chrono::milliseconds window_;
  std::string what_;
  clock::time_point window_start_{};
  size_t written_ = 0;    // in the current window
  uint64_t dropped_ = 0;  // in the current window
  uint64_t dropped_total_ = 0;
};

}  // namespace keel
