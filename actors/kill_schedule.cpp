#include "actors/kill_schedule.hpp"

#include <cstdlib>

#include "messages/errors.hpp"

namespace keel {

caf::expected<std::vector<kill_spec>> parse_kill_schedule(const std::string& text) {
  std::vector<kill_spec> out;
  size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    auto comma = text.find(',', pos);
    auto item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    auto at = item.find("@step=");
    auto bad = [&](const std::string& why) {
      return make_error(errc::invalid_argument,
                        "kill schedule item '" + item + "': " + why +
                          " (expected NAME@step=N, e.g. shard:0@step=40)");
    };
    if (at == std::string::npos || at == 0)
      return bad("missing NAME@step=");
    auto num = item.substr(at + 6);
    char* end = nullptr;
    auto step = std::strtoull(num.c_str(), &end, 10);
    if (num.empty() || *end != '\0' || num[0] == '-')
      return bad("step '" + num + "' is not a non-negative integer");
    out.push_back({item.substr(0, at), step});
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return out;
}

std::string to_string(const std::vector<kill_spec>& schedule) {
  std::string s;
  for (auto& k : schedule) {
    if (!s.empty())
      s += ",";
    s += k.actor + "@step=" + std::to_string(k.at_step);
  }
  return s;
}

}  // namespace keel
