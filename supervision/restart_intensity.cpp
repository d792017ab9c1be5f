#include "supervision/restart_intensity.hpp"

namespace keel::supervision {

restart_intensity::restart_intensity(int max_restarts, clock::duration period)
    : max_restarts_(max_restarts), period_(period) {}

bool restart_intensity::admit(clock::time_point now) {
  // OTP counts a restart at exactly now - period as outside the window.
  while (!stamps_.empty() && stamps_.front() <= now - period_)
    stamps_.pop_front();
  stamps_.push_back(now);
  return static_cast<int>(stamps_.size()) <= max_restarts_;
}

}  // namespace keel::supervision
