#include "supervision/clock.hpp"

#include <algorithm>

#include <caf/send.hpp>

namespace keel::supervision {

namespace {

class system_clock final : public clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }

  void send_later(const caf::actor& target, duration delay, caf::message msg) override {
    caf::delayed_anon_send(target, delay, std::move(msg));
  }
};

}  // namespace

std::shared_ptr<clock> make_system_clock() {
  return std::make_shared<system_clock>();
}

clock::time_point manual_clock::now() const {
  std::lock_guard<std::mutex> guard(mu_);
  return now_;
}

void manual_clock::send_later(const caf::actor& target, duration delay, caf::message msg) {
  std::lock_guard<std::mutex> guard(mu_);
  timers_.push_back(timer{now_ + std::max(delay, duration{0}), next_seq_++, target, std::move(msg)});
}

void manual_clock::advance(duration d) {
  std::vector<timer> due;
  {
    std::lock_guard<std::mutex> guard(mu_);
    now_ += d;
    auto not_due = std::stable_partition(timers_.begin(), timers_.end(),
                                         [&](const timer& t) { return t.due <= now_; });
    due.assign(std::make_move_iterator(timers_.begin()), std::make_move_iterator(not_due));
    timers_.erase(timers_.begin(), not_due);
  }
  std::sort(due.begin(), due.end(), [](const timer& a, const timer& b) {
    return a.due != b.due ? a.due < b.due : a.seq < b.seq;
  });
  // Sent outside the lock: a receiver may set a new timer at once.
  for (auto& t : due)
    caf::anon_send(t.target, std::move(t.msg));
}

size_t manual_clock::pending() const {
  std::lock_guard<std::mutex> guard(mu_);
  return timers_.size();
}

std::optional<clock::duration> manual_clock::next_due_in() const {
  std::lock_guard<std::mutex> guard(mu_);
  if (timers_.empty())
    return std::nullopt;
  auto earliest = std::min_element(timers_.begin(), timers_.end(),
                                   [](const timer& a, const timer& b) { return a.due < b.due; });
  return earliest->due - now_;
}

}  // namespace keel::supervision
