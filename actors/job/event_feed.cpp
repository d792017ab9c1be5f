// The event feed's thread: delivers the queue in order, then the outcome
// behind it (see event_feed.hpp).
#include "actors/job/event_feed.hpp"

namespace keel {

event_feed::event_feed() : thread_([this] { run(); }) {}

event_feed::~event_feed() {
  {
    std::lock_guard<std::mutex> lock(mtx_);
    stopped_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void event_feed::push(job_event e) {
  {
    std::lock_guard<std::mutex> lock(mtx_);
    if (closed_)
      return;
    queue_.push_back(std::move(e));
  }
  changed_.notify_all();
}

void event_feed::close(outcome o) {
  {
    std::lock_guard<std::mutex> lock(mtx_);
    if (closed_)
      return;
    closed_ = true;
    closing_ = std::move(o);
  }
  changed_.notify_all();
}

void event_feed::set_callback(callback f) {
  {
    std::lock_guard<std::mutex> lock(mtx_);
    callback_ = f ? std::make_shared<callback>(std::move(f)) : nullptr;
  }
  changed_.notify_all();
}

std::optional<event_feed::outcome> event_feed::await(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mtx_);
  waiting_ = true;
  changed_.notify_all();
  changed_.wait_for(lock, timeout, [&] { return outcome_.has_value() || thrown_; });
  if (thrown_)
    std::rethrow_exception(thrown_);
  return outcome_;
}

void event_feed::stop_delivering() {
  std::unique_lock<std::mutex> lock(mtx_);
  stopped_ = true;
  changed_.notify_all();
  if (!on_feed_thread())
    changed_.wait(lock, [&] { return !delivering_; });
}

// An event waits while there is no callback and nobody has waited yet.
void event_feed::run() {
  std::unique_lock<std::mutex> lock(mtx_);
  for (;;) {
    changed_.wait(lock, [&] {
      return stopped_ || (!queue_.empty() && (callback_ || waiting_)) ||
             (queue_.empty() && closing_.has_value());
    });
    if (stopped_)
      return;
    if (queue_.empty()) {
      outcome_ = std::move(closing_);
      closing_.reset();
      changed_.notify_all();
      continue;
    }
    auto e = std::move(queue_.front());
    queue_.pop_front();
    auto f = callback_;
    if (!f || thrown_)
      continue;
    delivering_ = true;
    lock.unlock();
    try {
      (*f)(e);
    } catch (...) {
      lock.lock();
      thrown_ = std::current_exception();
      delivering_ = false;
      changed_.notify_all();
      continue;
    }
    lock.lock();
    delivering_ = false;
    changed_.notify_all();
  }
}

}  // namespace keel
