#include "actors/fault_plan.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>

#include "messages/errors.hpp"

namespace keel {

namespace {

const char* kind_name(fault_kind k) {
  switch (k) {
    case fault_kind::kill: return "kill";
    case fault_kind::exit: return "exit";
    case fault_kind::raise: return "throw";
    case fault_kind::flip: return "flip";
    case fault_kind::drop: return "drop";
    case fault_kind::duplicate: return "dup";
    case fault_kind::delay: return "delay";
    case fault_kind::enospc: return "enospc";
    case fault_kind::eio: return "eio";
    case fault_kind::tear: return "tear";
  }
  return "?";
}

bool parse_kind(const std::string& s, fault_kind& out) {
  for (auto k : {fault_kind::kill, fault_kind::exit, fault_kind::raise, fault_kind::drop,
                 fault_kind::duplicate, fault_kind::delay, fault_kind::enospc, fault_kind::eio,
                 fault_kind::tear, fault_kind::flip})
    if (s == kind_name(k)) {
      out = k;
      return true;
    }
  return false;
}

bool parse_number(const std::string& s, uint64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18)
    return false;
  out = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

caf::expected<fault> parse_one(const std::string& item) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "fault '" + item + "': " + why + " (expected KIND:TARGET@STEP[xCOUNT][+MSms])");
  };
  fault f;
  auto colon = item.find(':');
  auto at = item.rfind('@');
  if (colon == std::string::npos || at == std::string::npos || at < colon)
    return bad("missing KIND:TARGET@STEP");
  if (!parse_kind(item.substr(0, colon), f.kind))
    return bad("unknown kind '" + item.substr(0, colon) +
               "' (kill, exit, throw, drop, dup, delay, enospc, eio, tear, flip)");
  f.target = item.substr(colon + 1, at - colon - 1);
  if (f.target.empty())
    return bad("empty target");
  auto rest = item.substr(at + 1);
  std::string delay;
  if (auto plus = rest.find('+'); plus != std::string::npos) {
    delay = rest.substr(plus + 1);
    rest = rest.substr(0, plus);
    if (delay.size() < 3 || delay.substr(delay.size() - 2) != "ms")
      return bad("delay '" + delay + "' must end in ms");
    uint64_t ms = 0;
    if (!parse_number(delay.substr(0, delay.size() - 2), ms) || ms > 60000)
      return bad("delay '" + delay + "' is not 0..60000 ms");
    f.delay_ms = static_cast<uint32_t>(ms);
  }
  uint64_t count = 1;
  if (auto x = rest.find('x'); x != std::string::npos) {
    if (!parse_number(rest.substr(x + 1), count) || count == 0 || count > 1000000)
      return bad("count '" + rest.substr(x + 1) + "' is not 1..1000000");
    rest = rest.substr(0, x);
  }
  f.count = static_cast<uint32_t>(count);
  if (!parse_number(rest, f.at_step))
    return bad("step '" + rest + "' is not a non-negative integer");
  bool storage = f.kind == fault_kind::enospc || f.kind == fault_kind::eio || f.kind == fault_kind::tear;
  if (storage && f.target != "write" && f.target != "fsync")
    return bad("a storage fault targets 'write' or 'fsync'");
  if (f.kind == fault_kind::tear && f.target != "write")
    return bad("only a write can be torn");
  bool message = f.kind == fault_kind::drop || f.kind == fault_kind::duplicate || f.kind == fault_kind::delay;
  if (message && f.target.rfind("worker:", 0) != 0)
    return bad("message faults target worker:N or worker:N>shard:M");
  if (f.kind == fault_kind::flip && f.target != "snapshot")
    return bad("a bit flip targets 'snapshot'");
  if (f.kind == fault_kind::raise && (f.target == "shards" || f.target == "workers" || f.target == "root"))
    return bad("supervisors do not run user code to throw from: use kill or exit");
  if (f.kind == fault_kind::delay && f.delay_ms == 0)
    return bad("a delay needs +MSms");
  return f;
}

}  // namespace

caf::expected<std::vector<fault>> parse_fault_plan(const std::string& text) {
  std::vector<fault> out;
  size_t pos = 0;
  while (pos < text.size()) {
    auto comma = text.find(',', pos);
    auto item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    auto f = parse_one(item);
    if (!f)
      return f.error();
    out.push_back(*f);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return out;
}

std::string to_string(const fault& f) {
  std::string s = std::string(kind_name(f.kind)) + ":" + f.target + "@" + std::to_string(f.at_step);
  if (f.count != 1)
    s += "x" + std::to_string(f.count);
  if (f.delay_ms != 0)
    s += "+" + std::to_string(f.delay_ms) + "ms";
  return s;
}

std::string to_string(const std::vector<fault>& plan) {
  std::string s;
  for (auto& f : plan)
    s += (s.empty() ? "" : ",") + to_string(f);
  return s;
}

std::vector<fault> random_fault_plan(uint64_t seed, const fault_mix& mix) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  std::vector<fault_kind> kinds;
  if (mix.kills)
    kinds.insert(kinds.end(), {fault_kind::kill, fault_kind::exit, fault_kind::raise});
  if (mix.messages)
    kinds.insert(kinds.end(), {fault_kind::drop, fault_kind::duplicate, fault_kind::delay});
  if (mix.storage)
    kinds.insert(kinds.end(), {fault_kind::enospc, fault_kind::eio, fault_kind::tear, fault_kind::flip});
  std::vector<fault> plan;
  for (uint32_t i = 0; i < mix.faults && !kinds.empty(); ++i) {
    fault f;
    f.kind = kinds[pick(kinds.size())];
    f.at_step = mix.first_step + pick(mix.last_step - mix.first_step + 1);
    switch (f.kind) {
      case fault_kind::kill:
      case fault_kind::exit:
      case fault_kind::raise: {
        std::vector<std::string> names = {"checkpointer"};
        for (uint32_t s = 0; s < mix.shards; ++s)
          names.push_back("shard:" + std::to_string(s));
        for (uint32_t w = 0; w < mix.workers; ++w)
          names.push_back("worker:" + std::to_string(w));
        if (mix.supervisors && f.kind != fault_kind::raise)
          names.insert(names.end(), {"shards", "workers", "root"});
        f.target = names[pick(names.size())];
        break;
      }
      case fault_kind::drop:
      case fault_kind::duplicate:
      case fault_kind::delay:
        f.target = "worker:" + std::to_string(pick(mix.workers));
        if (pick(2) == 0)
          f.target += ">shard:" + std::to_string(pick(mix.shards));
        f.count = static_cast<uint32_t>(1 + pick(3));
        if (f.kind == fault_kind::delay)
          f.delay_ms = static_cast<uint32_t>(1 + pick(20));
        break;
      case fault_kind::flip:
        f.target = "snapshot";
        break;
      default:
        f.target = f.kind == fault_kind::tear || pick(2) == 0 ? "write" : "fsync";
        break;
    }
    plan.push_back(f);
  }
  std::stable_sort(plan.begin(), plan.end(),
                   [](const fault& a, const fault& b) { return a.at_step < b.at_step; });
  return plan;
}

}  // namespace keel
