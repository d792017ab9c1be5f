#include "storage/error_context.hpp"

#include <caf/message.hpp>

#include "messages/errors.hpp"

namespace keel {

std::string error_text(const caf::error& e) {
  if (!e || e.category() != error_category())
    return describe(e);
  const auto& ctx = e.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return describe(e);
}

caf::error in_context(const caf::error& e, const std::string& prefix) {
  if (!e)
    return e;
  auto code = e.category() == error_category() ? static_cast<errc>(e.code()) : errc::io_error;
  return make_error(code, prefix + error_text(e));
}

}  // namespace keel
