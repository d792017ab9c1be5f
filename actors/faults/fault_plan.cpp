#include "actors/faults/fault_plan.hpp"

#include <algorithm>
#include <cstdlib>

#include "actors/core/actor_id.hpp"
#include "messages/errors.hpp"

namespace keel {

namespace {

constexpr msg_kind all_msg_kinds[] = {msg_kind::push,  msg_kind::pull,     msg_kind::status,
                                      msg_kind::ack,   msg_kind::reply,    msg_kind::snapshot,
                                      msg_kind::update};

bool parse_kind(const std::string& s, fault_kind& out) {
  auto k = parse_fault_kind(s);
  if (k)
    out = *k;
  return k.has_value();
}

bool parse_number(const std::string& s, uint64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18)
    return false;
  out = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

// "worker:3" -> ("worker", 3); false for anything else.
bool split_indexed(const std::string& name, std::string& prefix, uint64_t& index) {
  auto colon = name.find(':');
  if (colon == std::string::npos)
    return false;
  prefix = name.substr(0, colon);
  return (prefix == "worker" || prefix == "shard" || prefix == "node") &&
         parse_number(name.substr(colon + 1), index);
}

// The role of a link end: "worker", "shard", "checkpointer", "directory",
// "*", or "" when it names no actor with links.
std::string link_role(const std::string& end) {
  std::string prefix;
  uint64_t index = 0;
  if (end == "*" || end == "checkpointer" || end == "directory")
    return end;
  return split_indexed(end, prefix, index) && prefix != "node" ? prefix : "";
}

bool link_exists(const std::string& from, const std::string& to) {
  auto fits = [](const std::string& role, const char* want) { return role == "*" || role == want; };
  return (fits(from, "worker") && fits(to, "shard")) || (fits(from, "shard") && fits(to, "worker")) ||
         (fits(from, "shard") && fits(to, "checkpointer")) ||
         (fits(from, "directory") && fits(to, "worker"));
}

// "@40", "@1500ms", "@push=200" (without the '@').
caf::error parse_trigger(const std::string& s, fault& f) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "'" + s + "' " + why + " (expected STEP, MSms or KIND=N with KIND one of push, "
                      "pull, status, ack, reply, snapshot, update)");
  };
  if (auto eq = s.find('='); eq != std::string::npos) {
    auto kind = s.substr(0, eq);
    bool known = false;
    for (auto k : all_msg_kinds)
      if (kind == to_string(k)) {
        f.of = k;
        known = true;
      }
    if (!known)
      return bad("counts no known message kind");
    if (!parse_number(s.substr(eq + 1), f.at_step) || f.at_step == 0)
      return bad("needs a message count of at least 1");
    f.when = trigger::messages;
    return {};
  }
  if (s.size() > 2 && s.compare(s.size() - 2, 2, "ms") == 0) {
    if (!parse_number(s.substr(0, s.size() - 2), f.at_step))
      return bad("is not a time in whole milliseconds");
    f.when = trigger::time;
    return {};
  }
  if (!parse_number(s, f.at_step))
    return bad("is not a step");
  f.when = trigger::step;
  return {};
}

// An error's text without its code, to nest it in another message.
std::string reason(const caf::error& e) {
  auto text = describe(e);
  auto colon = text.find(": ");
  return colon == std::string::npos ? text : text.substr(colon + 2);
}

caf::expected<fault> parse_one(const std::string& item) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "fault '" + item + "': " + why + " (expected KIND:TARGET@WHEN[xCOUNT][+MSms])");
  };
  fault f;
  auto colon = item.find(':');
  auto at = item.rfind('@');
  if (colon == std::string::npos || at == std::string::npos || at < colon)
    return bad("missing KIND:TARGET@WHEN");
  if (!parse_kind(item.substr(0, colon), f.kind))
    return bad("unknown kind '" + item.substr(0, colon) +
               "' (kill, exit, throw, drop, dup, delay, reorder, enospc, eio, tear, flip, "
               "kill9, stop, cut, crash, partition, split, oneway, drain, join)");
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
  if (auto err = parse_trigger(rest, f))
    return bad(reason(err));
  bool storage = f.kind == fault_kind::enospc || f.kind == fault_kind::eio || f.kind == fault_kind::tear;
  if (storage && f.target != "write" && f.target != "fsync")
    return bad("a storage fault targets 'write' or 'fsync'");
  if (f.kind == fault_kind::tear && f.target != "write")
    return bad("only a write can be torn");
  if (f.is_message_fault())
    if (auto err = check_link_target(f.target))
      return bad(reason(err));
  if (f.kind == fault_kind::flip && f.target != "snapshot")
    return bad("a bit flip targets 'snapshot'");
  if (f.kind == fault_kind::raise && (f.target == "shards" || f.target == "workers" || f.target == "root"))
    return bad("supervisors do not run user code to throw from: use kill or exit");
  std::string prefix;
  uint64_t index = 0;
  bool node = split_indexed(f.target, prefix, index) && prefix == "node";
  if (f.is_node_fault() != node)
    return bad(node ? "a node takes kill9, stop, cut, crash, partition, split, oneway, drain or join"
                    : "kill9, stop, cut, crash, partition, split, oneway, drain and join target node:N");
  bool lasts = f.kind == fault_kind::cut || f.is_network_fault();
  if ((f.kind == fault_kind::delay || lasts) && f.delay_ms == 0)
    return bad(lasts ? std::string("a ") + to_string(f.kind) + " needs +MSms (how long the node is away)"
                     : std::string("a delay needs +MSms"));
  bool disk = f.kind == fault_kind::enospc || f.kind == fault_kind::eio;
  if (f.kind != fault_kind::delay && !lasts && !disk && f.delay_ms != 0)
    return bad("only a delay, a cut, a partition, a split, a oneway, an enospc or an eio takes +MSms");
  if (!f.is_message_fault() && !disk && f.count != 1)
    return bad("only message faults, enospc and eio take xCOUNT");
  if (disk && f.count != 1 && f.delay_ms != 0)
    return bad("a storage fault lasts xCOUNT operations or +MSms, not both");
  return f;
}

std::string when_text(const fault& f) {
  switch (f.when) {
    case trigger::step: return std::to_string(f.at_step);
    case trigger::time: return std::to_string(f.at_step) + "ms";
    case trigger::messages: return std::string(to_string(f.of)) + "=" + std::to_string(f.at_step);
  }
  return "?";
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

const char* to_string(msg_kind k) {
  switch (k) {
    case msg_kind::push: return "push";
    case msg_kind::pull: return "pull";
    case msg_kind::status: return "status";
    case msg_kind::ack: return "ack";
    case msg_kind::reply: return "reply";
    case msg_kind::snapshot: return "snapshot";
    case msg_kind::update: return "update";
  }
  return "?";
}

caf::error check_link_target(const std::string& target) {
  auto links = std::string(
    "; links are worker:N>shard:M, shard:M>worker:N, shard:M>checkpointer and directory>worker:N, "
    "or one actor's name for all its links, with * for either end");
  auto gt = target.find('>');
  if (gt == std::string::npos) {
    auto role = link_role(target);
    if (role.empty())
      return make_error(errc::invalid_argument, "'" + target + "' names no actor with links" + links);
    return {};
  }
  auto from = link_role(target.substr(0, gt));
  auto to = link_role(target.substr(gt + 1));
  if (from.empty() || to.empty() || !link_exists(from, to))
    return make_error(errc::invalid_argument, "no messages travel '" + target + "'" + links);
  return {};
}

caf::error check_fault_plan(const std::vector<fault>& plan, uint32_t shards, uint32_t workers,
                            uint32_t nodes) {
  // Joins add nodes: the k-th new node is node:(nodes + k), whatever the
  // order of the joins' steps; the other entries may name it too.
  const uint32_t started = nodes;
  std::vector<uint64_t> joined;
  for (auto& f : plan)
    if (f.kind == fault_kind::join) {
      std::string prefix;
      uint64_t index = 0;
      split_indexed(f.target, prefix, index);
      if (started == 0)
        break;  // named below: no nodes at all
      if (index < started || std::find(joined.begin(), joined.end(), index) != joined.end())
        return make_error(errc::invalid_argument,
                          "fault '" + to_string(f) + "': a join names a new node, node:" +
                            std::to_string(started) + " or after, once (the job starts with " +
                            std::to_string(started) + " nodes)");
      joined.push_back(index);
    }
  nodes += static_cast<uint32_t>(joined.size());
  for (uint64_t k = 0; k < joined.size(); ++k)
    if (std::find(joined.begin(), joined.end(), started + k) == joined.end())
      return make_error(errc::invalid_argument,
                        "fault plan: its joins must name node:" + std::to_string(started) + " to node:" +
                          std::to_string(nodes - 1) + ", each once (node:" + std::to_string(started + k) +
                          " is missing)");
  auto check_name = [&](const fault& f, const std::string& name) -> caf::error {
    std::string prefix;
    uint64_t index = 0;
    if (!split_indexed(name, prefix, index))
      return {};
    auto have = prefix == "worker" ? workers : prefix == "node" ? nodes : shards;
    if (prefix == "node" && nodes == 0)
      return make_error(errc::invalid_argument,
                        "fault '" + to_string(f) + "': the job has no nodes: it runs in one "
                        "process (node faults need a cluster: keel cluster)");
    if (index >= have)
      return make_error(errc::invalid_argument,
                        "fault '" + to_string(f) + "': the job has no " + name + " (" +
                          std::to_string(have) + " " + prefix + "s, numbered from 0)");
    return {};
  };
  for (auto& f : plan) {
    if (f.is_kill()) {
      std::string prefix;
      uint64_t index = 0;
      bool known = f.target == "checkpointer" || f.target == "shards" || f.target == "workers" ||
                   f.target == "root" || split_indexed(f.target, prefix, index);
      if (!known)
        return make_error(errc::invalid_argument,
                          "fault '" + to_string(f) + "': no actor is named '" + f.target +
                            "' (shard:N, worker:N, checkpointer, shards, workers, root)");
    }
    auto gt = f.target.find('>');
    if (auto err = check_name(f, f.target.substr(0, gt)))
      return err;
    if (gt != std::string::npos)
      if (auto err = check_name(f, f.target.substr(gt + 1)))
        return err;
  }
  return {};
}

std::string to_string(const fault& f) {
  std::string s = std::string(to_string(f.kind)) + ":" + f.target + "@" + when_text(f);
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

fault kill_at(std::string actor, uint64_t step) {
  fault f;
  f.kind = fault_kind::kill;
  f.target = std::move(actor);
  f.when = trigger::step;
  f.at_step = step;
  return f;
}

caf::expected<std::vector<fault>> parse_kill_shorthand(const std::string& text) {
  std::vector<fault> out;
  size_t pos = 0;
  while (!text.empty()) {
    auto comma = text.find(',', pos);
    auto item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    auto at = item.find('@');
    auto bad = [&](const std::string& why) {
      return make_error(errc::invalid_argument, "--kill item '" + item + "': " + why +
                                                  " (expected NAME@step=N or NAME@N, e.g. shard:0@40)");
    };
    if (at == std::string::npos || at == 0)
      return bad("missing NAME@");
    auto num = item.substr(at + 1);
    if (num.rfind("step=", 0) == 0)
      num = num.substr(5);
    char* end = nullptr;
    auto step = std::strtoull(num.c_str(), &end, 10);
    if (num.empty() || *end != '\0' || num[0] == '-')
      return bad("step '" + num + "' is not a non-negative integer");
    auto f = kill_at(item.substr(0, at), step);
    if (auto id = parse_actor_id(f.target); id && id->is(actor_kind::node))
      f.kind = fault_kind::kill9;  // a node is killed whole, with SIGKILL
    out.push_back(f);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace keel
