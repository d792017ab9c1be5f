#pragma once
// keel's error codes. Every failure that crosses a layer boundary is a
// caf::error in the "keel" category whose context is one human-readable
// string naming what was wrong (the field, the file, the tensor). `describe`
// renders any caf::error, keel's or CAF's, without an actor system.

#include <cstdint>
#include <string>

#include <caf/error.hpp>

namespace keel {

enum class errc : uint8_t {
  malformed_message = 1,   // bytes are not a valid capnp message
  unsupported_version,     // a schema or format version this build does not know
  invalid_field,           // a field's value breaks the message's contract
  limit_exceeded,          // a size limit set on purpose was exceeded
  io_error,                // a file operation failed (errno in the text)
  damaged_snapshot,        // a stored snapshot failed validation
  not_found,               // a file, checkpoint, name or tensor does not exist
  shape_mismatch,          // a snapshot's tensor does not match expectations
  invalid_argument,        // a caller's argument (flag, config) is invalid
  timeout,                 // a bounded wait ran out
  escalated,               // a supervisor gave up (restart intensity exceeded)
  shutting_down,           // the target is stopping and will not answer
  start_failed,            // a supervisor could not start a child
  not_authenticated,       // a peer has not proven the cluster secret (or was refused for good)
  stale_incarnation,       // a message for one incarnation of an actor reached another (fencing)
  moved,                   // an actor stopped on purpose to run on another node (a drain, a rebalance)
  step_moved,              // a client asked for a step its worker is not at (a restart or rollback moved it)
};

// The atom naming keel's error category.
caf::atom_value error_category();

// Makes a keel error whose context is `what`.
caf::error make_error(errc code, std::string what);

// The name of an error code, e.g. "invalid_field".
const char* to_string(errc code);

// True if `e` is a keel error with this code.
bool is(const caf::error& e, errc code);

// Renders `e` as "invalid_field: Push.dense[3]: ..." for keel errors and as
// CAF renders it otherwise. An empty error renders as "ok".
std::string describe(const caf::error& e);

}  // namespace keel
