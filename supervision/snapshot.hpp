#pragma once
// A snapshot is the state a child may restart from, opaque to the supervisor:
// a label that names it in events and a shared, immutable payload (any type,
// e.g. a keel::frame_ptr or a std::shared_ptr<const my_state>). Candidates
// are tried newest first; one that fails the child spec's validator is
// skipped for the one before it, and with none left the child starts fresh.
// Snapshots are shared, never copied, so handing one over costs no bytes;
// they travel only between actors of one process.

#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/error.hpp>

namespace keel::supervision {

struct snapshot {
  std::string label;
  std::shared_ptr<const void> data;
  const std::type_info* type = nullptr;

  // Wraps `payload` (which the snapshot shares, not copies) under `label`.
  template <class T>
  static snapshot of(std::string label, std::shared_ptr<const T> payload) {
    return snapshot{std::move(label), std::move(payload), &typeid(T)};
  }

  // The payload as a T, or null if empty or if it holds another type.
  template <class T>
  std::shared_ptr<const T> as() const {
    if (!data || type == nullptr || *type != typeid(T))
      return nullptr;
    return std::static_pointer_cast<const T>(data);
  }

  explicit operator bool() const { return data != nullptr; }
};

// Checks a candidate before a child restarts from it; an error rejects it
// (and names why, for the restart event).
using snapshot_validator = std::function<caf::error(const snapshot&)>;

// Where a child spec finds the snapshots its child may start from (e.g. a
// store on disk): candidates for a child id, newest first, asked at every
// start.
using snapshot_source = std::function<std::vector<snapshot>(const std::string& child_id)>;

// The outcome of choosing a snapshot: the newest valid candidate (empty if
// none) and, for each candidate skipped, "label: why".
struct snapshot_choice {
  snapshot chosen;
  std::vector<std::string> rejected;
};

// Picks the newest candidate that `validate` accepts; a null validator
// accepts any non-empty candidate. An empty candidate is skipped as invalid.
snapshot_choice choose_snapshot(const std::vector<snapshot>& newest_first,
                                const snapshot_validator& validate);

}  // namespace keel::supervision

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(keel::supervision::snapshot)
