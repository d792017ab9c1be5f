#pragma once
// The job supervises its tree as root supervises its children: when local
// recovery is impossible (root went down, or a worker asks because a shard
// needs pushes no replay log holds) the job rolls the whole tree back to the
// newest valid checkpoint, and a rollback counts against the same restart
// intensity as a supervisor's restart (supervision::restart_intensity, OTP's
// boundary: a rollback exactly `period` ago is outside the window). One
// rollback too many is refused with errc::escalated naming root, the count
// and the last reason; the job then fails instead of rolling back forever.
// A plain value owned by the job's controller thread.

#include <chrono>
#include <string>

#include <caf/error.hpp>

#include "supervision/restart_intensity.hpp"

namespace keel {

class rollback_policy {
 public:
  rollback_policy(int max_rollbacks, std::chrono::milliseconds period);

  // Admits a rollback at `now` for `why`, or refuses it with the escalation.
  caf::error admit(supervision::clock::time_point now, const std::string& why);

 private:
  supervision::restart_intensity intensity_;
};

}  // namespace keel
