#pragma once
// A client_future<T> is the answer to one request of an application's
// training loop (ps_client, actors/job/ps_client.hpp): not there yet, then
// there for good, a T or a keel error naming what failed. It is a shared
// handle: copies see the same answer. Thread-safe: any thread may wait on,
// poll or attach callbacks to it while keel sets it from one of its own.
// A request is always answered (by its outcome, or by the job's end with
// errc::shutting_down), so a wait without a timeout cannot hang for good;
// wait() takes one all the same.
//
// Callbacks given to then() run once, with the answer: at once on the
// calling thread when it is already there, else on the keel thread that
// sets it (a thread of the job's actors: keep such a callback short, and
// never wait in it on another future of the same job, whose answer that
// thread may be the one to give).

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

#include "messages/errors.hpp"

namespace keel {

template <class T>
class client_future {
 public:
  using answer = caf::expected<T>;

  // A future no one will answer: ready() stays false (use make()).
  client_future() : st_(std::make_shared<state>()) {}

  // True once the answer is there.
  bool ready() const {
    std::lock_guard<std::mutex> g(st_->m);
    return st_->value.has_value();
  }

  // The answer, waiting up to `timeout` for it; errc::timeout when it has
  // not come by then (the request goes on: wait again).
  answer wait(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> g(st_->m);
    if (!st_->cv.wait_for(g, timeout, [&] { return st_->value.has_value(); }))
      return make_error(errc::timeout, "no answer within " + std::to_string(timeout.count()) + " ms");
    return *st_->value;
  }

  // Calls `f` with the answer once it is there (see the header's opening).
  void then(std::function<void(const answer&)> f) const {
    std::unique_lock<std::mutex> g(st_->m);
    if (!st_->value) {
      st_->callbacks.push_back(std::move(f));
      return;
    }
    g.unlock();
    f(*st_->value);  // set once, never changed again: read without the lock
  }

  // ---- keel's side ----
  // Gives the answer; the first one given counts, later ones are ignored.
  // Runs the callbacks on the calling thread, after releasing the lock.
  void set(answer a) const {
    std::vector<std::function<void(const answer&)>> run;
    {
      std::lock_guard<std::mutex> g(st_->m);
      if (st_->value)
        return;
      st_->value = std::move(a);
      run.swap(st_->callbacks);
    }
    st_->cv.notify_all();
    for (auto& f : run) f(*st_->value);
  }

 private:
  struct state {
    mutable std::mutex m;
    std::condition_variable cv;
    std::optional<answer> value;
    std::vector<std::function<void(const answer&)>> callbacks;
  };
  std::shared_ptr<state> st_;
};

}  // namespace keel
