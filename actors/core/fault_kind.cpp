#include "actors/core/fault_kind.hpp"

namespace keel {

const char* to_string(fault_kind k) {
  switch (k) {
    case fault_kind::kill: return "kill";
    case fault_kind::exit: return "exit";
    case fault_kind::raise: return "throw";
    case fault_kind::flip: return "flip";
    case fault_kind::drop: return "drop";
    case fault_kind::duplicate: return "dup";
    case fault_kind::delay: return "delay";
    case fault_kind::reorder: return "reorder";
    case fault_kind::enospc: return "enospc";
    case fault_kind::eio: return "eio";
    case fault_kind::tear: return "tear";
    case fault_kind::kill9: return "kill9";
    case fault_kind::stop: return "stop";
    case fault_kind::cut: return "cut";
    case fault_kind::crash: return "crash";
    case fault_kind::partition: return "partition";
    case fault_kind::split: return "split";
    case fault_kind::oneway: return "oneway";
    case fault_kind::drain: return "drain";
    case fault_kind::join: return "join";
  }
  return "?";
}

std::optional<fault_kind> parse_fault_kind(std::string_view text) {
  for (auto k : all_fault_kinds)
    if (text == to_string(k))
      return k;
  for (auto k : in_node_fault_kinds)
    if (text == to_string(k))
      return k;
  for (auto k : network_fault_kinds)
    if (text == to_string(k))
      return k;
  for (auto k : membership_kinds)
    if (text == to_string(k))
      return k;
  return std::nullopt;
}

}  // namespace keel
