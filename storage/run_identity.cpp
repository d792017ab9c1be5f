#include "storage/run_identity.hpp"

#include <map>
#include <sstream>

namespace keel {

namespace {

std::map<std::string, std::string> fields(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos)
      out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace

std::string config_difference(const std::string& there, const std::string& here) {
  auto a = fields(there);
  auto b = fields(here);
  std::string out;
  auto add = [&](const std::string& name, const std::string& x, const std::string& y) {
    out += (out.empty() ? "" : "; ") + name + " (" + (x.empty() ? "none" : x) + " there, " +
           (y.empty() ? "none" : y) + " here)";
  };
  for (auto& [name, v] : a) {
    auto it = b.find(name);
    auto mine = it == b.end() ? std::string() : it->second;
    if (mine != v)
      add(name, v, mine);
  }
  for (auto& [name, v] : b)
    if (!a.count(name))
      add(name, "", v);
  return out;
}

}  // namespace keel
