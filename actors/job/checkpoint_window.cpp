// The checkpoint window's rules (checkpoint_window.hpp). The storage
// deadline's error is the one message a failing disk leaves the user: it
// names the last failure and the last good checkpoint, which nothing
// touches afterwards (a resume continues from it).
#include "actors/job/checkpoint_window.hpp"

#include <algorithm>
#include <cstdio>

namespace keel {

namespace {

std::string seconds_text(std::chrono::steady_clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s",
                std::chrono::duration_cast<std::chrono::duration<double>>(d).count());
  return text;
}

}  // namespace

checkpoint_window::checkpoint_window(uint64_t every, std::chrono::milliseconds timeout,
                                     std::chrono::milliseconds storage_deadline)
  : window_(every, timeout), storage_deadline_(storage_deadline) {}

checkpoint_window::outcome checkpoint_window::failed(uint64_t step, const std::string& detail,
                                                     bool write_failure, int64_t at_ms, clock::time_point now) {
  outcome out;
  out.window_moved = window_.given_up(step);  // the previous checkpoint stays in force
  last_failure_ = detail;
  bool stuck = write_failure || !paused_.empty();
  if (stuck && !failing_since_)
    failing_since_ = now;
  out.lines = failures_.failed(detail, at_ms);
  return out;
}

checkpoint_window::outcome checkpoint_window::committed(uint64_t checkpoint, uint64_t step,
                                                        const std::vector<committed_shard>& shards,
                                                        int64_t at_ms) {
  outcome out;
  failing_since_.reset();
  last_good_ = checkpoint;
  last_good_step_ = step;
  if (failures_.active())
    out.lines = failures_.ended("checkpoint " + std::to_string(checkpoint) + " committed at step " +
                                  std::to_string(step),
                                at_ms);
  out.window_moved = window_.committed(checkpoint, step, shards);
  return out;
}

std::optional<checkpoint_window::clock::time_point> checkpoint_window::storage_deadline() const {
  if (!failing_since_)
    return std::nullopt;
  return *failing_since_ + storage_deadline_;
}

std::optional<std::string> checkpoint_window::storage_expired(clock::time_point now, const std::string& dir) const {
  auto due = storage_deadline();
  if (!due || now < *due)
    return std::nullopt;
  std::string last_good =
    last_good_ == 0
      ? "no checkpoint of this run has committed, so there is nothing to resume from"
      : "the last good checkpoint is " + std::to_string(last_good_) + " (step " + std::to_string(last_good_step_) +
          ") in " + dir + ", left intact: keel train --resume " + dir + " continues from it";
  return "checkpoints have failed for " + seconds_text(now - *failing_since_) + ", past the storage deadline of " +
         seconds_text(storage_deadline_) + " (" + std::to_string(std::max<uint64_t>(1, failures_.count())) +
         " failures in a row); the last: " + last_failure_ + "; " + last_good;
}

}  // namespace keel
