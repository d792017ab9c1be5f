#pragma once
// An io_executor runs blocking jobs (file I/O, fsync) on threads of its own,
// so that callers on actor threads never block: the storage layer's answer to
// "off the actor threads" without knowing about actors. Jobs start in the
// order they were posted; with more than one thread they may run
// concurrently. The destructor lets every queued job finish, then joins.
// Thread-safe. A job must not throw: one that does terminates the process.

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace keel {

class io_executor {
 public:
  // Starts `threads` worker threads (at least one).
  explicit io_executor(size_t threads = 2);
  ~io_executor();

  io_executor(const io_executor&) = delete;
  io_executor& operator=(const io_executor&) = delete;

  // Queues `job`; it runs on one of the executor's threads.
  void post(std::function<void()> job);

  // Queues `f` and returns a future of its result.
  template <class F>
  auto submit(F f) -> std::future<std::invoke_result_t<F&>> {
    using result = std::invoke_result_t<F&>;
    auto task = std::make_shared<std::packaged_task<result()>>(std::move(f));
    auto out = task->get_future();
    post([task] { (*task)(); });
    return out;
  }

  size_t threads() const { return threads_.size(); }

 private:
  void run();

  std::mutex mtx_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace keel
