#pragma once
// How keel's actors die of an exception: the exception becomes the actor's
// exit reason (its supervisor reports it and restarts the actor), quietly,
// instead of CAF's default print to stderr.

#include <exception>
#include <stdexcept>
#include <string>

#include <caf/error.hpp>
#include <caf/sec.hpp>

namespace keel {

inline caf::error exception_as_error(std::exception_ptr& eptr) {
  try {
    std::rethrow_exception(eptr);
  } catch (const std::exception& e) {
    return caf::make_error(caf::sec::runtime_error, std::string("exception: ") + e.what());
  } catch (...) {
    return caf::make_error(caf::sec::runtime_error, std::string("exception of unknown type"));
  }
}

}  // namespace keel
