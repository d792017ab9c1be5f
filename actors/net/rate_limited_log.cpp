#include "actors/net/rate_limited_log.hpp"

namespace keel {

rate_limited_log::rate_limited_log(std::function<void(const std::string&)> sink, size_t burst,
                                   std::chrono::milliseconds window, std::string what)
    : sink_(std::move(sink)), burst_(burst), window_(window), what_(std::move(what)) {}

void rate_limited_log::flush(clock::time_point now) {
  if (now - window_start_ < window_)
    return;
  if (dropped_ > 0)
    sink_(std::to_string(dropped_) + " more " + what_ + " in " + std::to_string(window_.count()) +
          " ms not logged one by one");
  window_start_ = now;
  written_ = 0;
  dropped_ = 0;
}

void rate_limited_log::operator()(const std::string& line, clock::time_point now) {
  flush(now);
  if (written_ < burst_) {
    ++written_;
    sink_(line);
    return;
  }
  ++dropped_;
  ++dropped_total_;
}

rate_limited_log::clock::time_point rate_limited_log::next_flush() const {
  return dropped_ > 0 ? window_start_ + window_ : clock::time_point::max();
}

}  // namespace keel
