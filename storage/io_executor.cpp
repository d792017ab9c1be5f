#include "storage/io_executor.hpp"

namespace keel {

io_executor::io_executor(size_t threads) {
  if (threads == 0)
    threads = 1;
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this] { run(); });
}

io_executor::~io_executor() {
  {
    std::lock_guard<std::mutex> guard(mtx_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void io_executor::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> guard(mtx_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void io_executor::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mtx_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      // Drain before stopping: a queued checkpoint write is never dropped.
      if (queue_.empty())
        return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

}  // namespace keel
