#pragma once
// An event_feed carries a job's timeline from its controller (an actor) to
// the application. It calls the application's callback for every event, in
// the order the controller recorded them, one at a time, on a thread of its
// own: never the controller's, never the thread that waits. A callback may
// therefore block and may call the job (kill, inject, parameters, stop).
// Events recorded before a callback is set are held for it, so a callback
// set right after job::start sees the run from its first event; once someone
// waits with no callback set, they are dropped instead. The controller
// closes the feed with the job's outcome, which await() returns only after
// every event recorded before it has been delivered. An exception thrown by
// a callback stops the deliveries and is rethrown by await(). Thread-safe.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <caf/expected.hpp>

#include "actors/core/job_event.hpp"
#include "actors/job/job.hpp"

namespace keel {

class event_feed {
 public:
  using callback = std::function<void(const job_event&)>;
  using outcome = caf::expected<job_result>;

  event_feed();
  // Stops the deliveries (see stop_delivering) and joins the feed's thread.
  ~event_feed();
  event_feed(const event_feed&) = delete;
  event_feed& operator=(const event_feed&) = delete;

  // The controller's side. Events pushed after close() are dropped.
  void push(job_event e);
  void close(outcome o);

  // The application's side.
  // Calls `f` for every event not delivered yet, held ones first.
  void set_callback(callback f);
  // The outcome, once every event before it has been delivered; nullopt if
  // it has not come within `timeout`.
  std::optional<outcome> await(std::chrono::milliseconds timeout);
  // No callback runs once this returns (a running one is waited for, unless
  // the caller is that callback).
  void stop_delivering();
  // The caller is the feed's thread (a callback).
  bool on_feed_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void run();

  std::mutex mtx_;
  std::condition_variable changed_;
  std::deque<job_event> queue_;
  std::optional<outcome> closing_;  // closed, not yet published: events before it are queued
  std::optional<outcome> outcome_;  // published
  std::shared_ptr<callback> callback_;
  std::exception_ptr thrown_;       // by a callback; rethrown by await
  bool closed_ = false;
  bool waiting_ = false;            // someone waited: events with no callback are dropped
  bool delivering_ = false;         // a callback runs now
  bool stopped_ = false;
  std::thread thread_;              // last: started once the members above exist
};

}  // namespace keel
