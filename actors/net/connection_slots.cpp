#include "actors/net/connection_slots.hpp"

namespace keel {

connection_slots::decision connection_slots::next(clock::time_point now) const {
  decision d;
  if (slots_.size() < capacity_)
    return d;
  // Answered first: its client has the response already.
  for (auto& [id, s] : slots_)
    if (s.at == stage::written) {
      d.what = decision::action::evict_then_admit;
      d.victim = id;
      return d;
    }
  d.what = decision::action::wait;
  for (auto& [id, s] : slots_) {
    if (s.at != stage::waiting)
      continue;
    // The oldest waiting one: the first to leave its grace.
    if (now - s.accepted >= grace_) {
      d.what = decision::action::evict_then_admit;
      d.victim = id;
    } else {
      d.retry_at = s.accepted + grace_;
    }
    return d;
  }
  return d;  // every slot is writing a response
}

connection_slots::slot_id connection_slots::add(clock::time_point now) {
  auto id = next_id_++;
  slots_.emplace(id, slot{now, stage::waiting});
  return id;
}

void connection_slots::writing(slot_id id) {
  auto it = slots_.find(id);
  if (it != slots_.end())
    it->second.at = stage::writing;
}

void connection_slots::written(slot_id id) {
  auto it = slots_.find(id);
  if (it != slots_.end())
    it->second.at = stage::written;
}

void connection_slots::release(slot_id id) {
  slots_.erase(id);
}

}  // namespace keel
