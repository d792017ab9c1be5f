#pragma once
// Adding context to an error as it travels up through storage, so the error
// a caller finally sees says what was being done ("writing
// ckpt-...snap: fsync ...: Input/output error (EIO)") while keeping the
// original keel error code that `keel::is` tests. Pure functions.

#include <string>

#include <caf/error.hpp>

namespace keel {

// The error's text without its code name: "fsync x: ..." for keel errors,
// CAF's rendering for others.
std::string error_text(const caf::error& e);

// `e` with `prefix` put in front of its text; keeps a keel error's code,
// turns any other error into errc::io_error. An empty `e` stays empty.
caf::error in_context(const caf::error& e, const std::string& prefix);

}  // namespace keel
