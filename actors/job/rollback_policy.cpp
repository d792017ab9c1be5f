#include "actors/job/rollback_policy.hpp"

#include <algorithm>

#include "messages/errors.hpp"

namespace keel {

rollback_policy::rollback_policy(int max_rollbacks, std::chrono::milliseconds period)
    : intensity_(std::max(max_rollbacks, 0), period) {}

caf::error rollback_policy::admit(supervision::clock::time_point now, const std::string& why) {
  if (intensity_.admit(now))
    return {};
  auto period_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(intensity_.period()).count();
  return make_error(errc::escalated,
                    "root: " + std::to_string(intensity_.recent()) + " rollbacks within " +
                      std::to_string(period_ms) + " ms exceed the restart intensity (" +
                      std::to_string(intensity_.max_restarts()) + "); the last: " + why);
}

}  // namespace keel
