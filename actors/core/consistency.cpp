#include "actors/core/consistency.hpp"

#include <cstdlib>

#include "messages/errors.hpp"

namespace keel {

caf::expected<consistency> parse_consistency(const std::string& text) {
  if (text == "bsp")
    return consistency{consistency_kind::bsp, 0};
  if (text == "asp")
    return consistency{consistency_kind::asp, 0};
  if (text.rfind("ssp:", 0) == 0 && text.size() > 4) {
    char* end = nullptr;
    auto s = std::strtoul(text.c_str() + 4, &end, 10);
    if (*end == '\0' && text[4] != '-' && s <= 1000000)
      return consistency{consistency_kind::ssp, static_cast<uint32_t>(s)};
  }
  return make_error(errc::invalid_argument,
                    "consistency '" + text + "' is not bsp, asp or ssp:S with S a bound in steps");
}

std::string to_string(const consistency& c) {
  switch (c.kind) {
    case consistency_kind::bsp: return "bsp";
    case consistency_kind::asp: return "asp";
    case consistency_kind::ssp: return "ssp:" + std::to_string(c.staleness);
  }
  return "unknown";
}

}  // namespace keel
