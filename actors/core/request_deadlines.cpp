#include "actors/core/request_deadlines.hpp"

#include <algorithm>

namespace keel {

std::optional<request_deadlines::time_point> request_deadlines::add(uint64_t id, time_point due) {
  open_.push_back({id, due});
  if (timer_ && *timer_ <= due)
    return std::nullopt;
  timer_ = due;
  return due;
}

void request_deadlines::answered(uint64_t id) {
  // Few requests are open at a time (one or two per shard), and answers
  // come mostly in the order asked: a scan from the front is short.
  auto it = std::find_if(open_.begin(), open_.end(), [id](const entry& e) { return e.id == id; });
  if (it != open_.end())
    open_.erase(it);
}

std::vector<uint64_t> request_deadlines::fire(time_point now, std::optional<time_point>* rearm) {
  std::vector<uint64_t> due;
  std::optional<time_point> next;
  auto keep = open_.begin();
  for (auto& e : open_) {
    if (e.due <= now) {
      due.push_back(e.id);
      continue;
    }
    if (!next || e.due < *next)
      next = e.due;
    *keep++ = e;
  }
  open_.erase(keep, open_.end());
  // A timer armed for later than `now` is still out (this one fired early
  // or was superseded): it serves when it is no later than the next due.
  if (timer_ && *timer_ > now && next && *timer_ <= *next) {
    *rearm = std::nullopt;
    return due;
  }
  timer_ = next;
  *rearm = next;
  return due;
}

}  // namespace keel
