#include "messages/errors.hpp"

#include <caf/atom.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace keel {

caf::atom_value error_category() {
  return caf::atom("keel");
}

caf::error make_error(errc code, std::string what) {
  return caf::error(static_cast<uint8_t>(code), error_category(),
                    caf::make_message(std::move(what)));
}

const char* to_string(errc code) {
  switch (code) {
    case errc::malformed_message: return "malformed_message";
    case errc::unsupported_version: return "unsupported_version";
    case errc::invalid_field: return "invalid_field";
    case errc::limit_exceeded: return "limit_exceeded";
    case errc::io_error: return "io_error";
    case errc::damaged_snapshot: return "damaged_snapshot";
    case errc::not_found: return "not_found";
    case errc::shape_mismatch: return "shape_mismatch";
    case errc::invalid_argument: return "invalid_argument";
    case errc::timeout: return "timeout";
    case errc::escalated: return "escalated";
    case errc::shutting_down: return "shutting_down";
    case errc::start_failed: return "start_failed";
    case errc::not_authenticated: return "not_authenticated";
    case errc::stale_incarnation: return "stale_incarnation";
    case errc::moved: return "moved";
    case errc::step_moved: return "step_moved";
  }
  return "unknown_keel_error";
}

bool is(const caf::error& e, errc code) {
  return e && e.category() == error_category() && e.code() == static_cast<uint8_t>(code);
}

std::string describe(const caf::error& e) {
  if (!e)
    return "ok";
  if (e.category() != error_category())
    return caf::to_string(e);
  std::string out = to_string(static_cast<errc>(e.code()));
  const auto& ctx = e.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) {
    out += ": ";
    out += ctx.get_as<std::string>(0);
  }
  return out;
}

}  // namespace keel
