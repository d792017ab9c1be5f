#include "actors/faults/link_faults.hpp"

#include <vector>

#include "actors/faults/link_hold.hpp"

#include "messages/errors.hpp"

namespace keel {

caf::error link_faults::arm(const fault& f) {
  armed a;
  switch (f.kind) {
    case fault_kind::drop: a.action = send_action::drop; break;
    case fault_kind::duplicate: a.action = send_action::duplicate; break;
    case fault_kind::delay: a.action = send_action::delay; break;
    case fault_kind::reorder: a.action = send_action::reorder; break;
    default:
      return make_error(errc::invalid_argument, "'" + to_string(f) + "' is not a message fault");
  }
  if (auto err = check_link_target(f.target))
    return err;
  auto gt = f.target.find('>');
  if (gt == std::string::npos) {
    a.from = a.to = f.target;
    a.either = true;
  } else {
    a.from = f.target.substr(0, gt);
    a.to = f.target.substr(gt + 1);
  }
  a.remaining = f.count;
  a.delay_ms = f.delay_ms;
  std::lock_guard<std::mutex> guard(mtx_);
  armed_.push_back(std::move(a));
  ++busy_;
  return {};
}

send_decision link_faults::on_message(const std::string& from, const std::string& to,
                                      msg_kind kind) {
  auto seen = ++counts_[static_cast<size_t>(kind)];
  if (busy_.load(std::memory_order_acquire) == 0)
    return {};
  fire_watches(kind, seen);
  std::lock_guard<std::mutex> guard(mtx_);
  auto is = [](const std::string& pattern, const std::string& name) {
    return pattern == "*" || pattern == name;
  };
  for (auto it = armed_.begin(); it != armed_.end(); ++it) {
    bool hit = it->either ? (is(it->from, from) || is(it->from, to))
                          : (is(it->from, from) && is(it->to, to));
    if (!hit)
      continue;
    send_decision d{it->action, it->delay_ms};
    switch (it->action) {
      case send_action::drop: ++hits_.dropped; break;
      case send_action::duplicate: ++hits_.duplicated; break;
      case send_action::delay: ++hits_.delayed; break;
      case send_action::reorder: ++hits_.reordered; break;
      case send_action::deliver: break;
    }
    if (--it->remaining == 0) {
      armed_.erase(it);
      --busy_;
    }
    return d;
  }
  return {};
}

void link_faults::fire_watches(msg_kind kind, uint64_t now) {
  std::vector<std::function<void()>> due;
  {
    std::lock_guard<std::mutex> guard(mtx_);
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (it->kind == kind && now >= it->at) {
        due.push_back(std::move(it->fire));
        it = watches_.erase(it);
        --busy_;
      } else {
        ++it;
      }
    }
  }
  for (auto& f : due)
    f();
}

uint64_t link_faults::count(msg_kind kind) const {
  return counts_[static_cast<size_t>(kind)].load();
}

void link_faults::at_count(msg_kind kind, uint64_t n, std::function<void()> fire) {
  {
    std::lock_guard<std::mutex> guard(mtx_);
    watches_.push_back({kind, n, std::move(fire)});
    ++busy_;
  }
  fire_watches(kind, count(kind));
}

size_t link_faults::pending() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return armed_.size();
}

message_fault_hits link_faults::hits() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return hits_;
}

void held_deliveries::delivered(const std::string& link) {
  std::vector<std::function<void()>> due;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.reorder && it->second.link == link) {
      due.push_back(std::move(it->second.run));
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& run : due)
    run();
}

void held_deliveries::release(uint64_t id) {
  auto it = held_.find(id);
  if (it == held_.end())
    return;
  auto run = std::move(it->second.run);
  held_.erase(it);
  run();
}

}  // namespace keel
