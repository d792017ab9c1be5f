#include "supervision/snapshot.hpp"

#include "messages/errors.hpp"

namespace keel::supervision {

snapshot_choice choose_snapshot(const std::vector<snapshot>& newest_first,
                                const snapshot_validator& validate) {
  snapshot_choice out;
  for (const auto& candidate : newest_first) {
    caf::error why;
    if (!candidate)
      why = make_error(errc::damaged_snapshot, "empty payload");
    else if (validate)
      why = validate(candidate);
    if (!why) {
      out.chosen = candidate;
      return out;
    }
    out.rejected.push_back(candidate.label + ": " + describe(why));
  }
  return out;
}

}  // namespace keel::supervision
