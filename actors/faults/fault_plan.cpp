#include "actors/faults/fault_plan.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>

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

caf::error parse_fault_families(const std::string& text, fault_mix& mix) {
  mix.kills = mix.supervisors = mix.messages = mix.storage = mix.timed = mix.node_faults = mix.membership = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    auto comma = text.find(',', pos);
    auto word = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (word == "all")
      mix.kills = mix.supervisors = mix.messages = mix.storage = mix.timed = true;
    else if (word == "kills")
      mix.kills = true;
    else if (word == "supervisors")
      mix.kills = mix.supervisors = true;
    else if (word == "messages")
      mix.messages = true;
    else if (word == "storage")
      mix.storage = true;
    else if (word == "timed")
      mix.timed = true;
    else if (word == "nodes")
      mix.node_faults = true;
    else if (word == "membership")
      mix.membership = true;
    else
      return make_error(errc::invalid_argument,
                        "fault mix '" + text + "': unknown family '" + word +
                          "' (kills, supervisors, messages, storage, timed, nodes, membership, all)");
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  if (!mix.kills && !mix.messages && !mix.storage && !mix.node_faults && !mix.membership)
    return make_error(errc::invalid_argument,
                      "fault mix '" + text + "' names no kind of fault (kills, messages, storage, nodes or membership)");
  return {};
}

namespace {

// The fault kinds a mix allows, in all_fault_kinds' order.
std::vector<fault_kind> kinds_in(const fault_mix& mix) {
  std::vector<fault_kind> kinds;
  for (auto k : all_fault_kinds) {
    bool storage = k == fault_kind::enospc || k == fault_kind::eio || k == fault_kind::tear ||
                   k == fault_kind::flip;
    fault probe;
    probe.kind = k;
    if ((probe.is_kill() && mix.kills) || (probe.is_message_fault() && mix.messages) ||
        (storage && mix.storage) || (probe.is_node_fault() && mix.node_faults && mix.nodes > 0))
      kinds.push_back(k);
  }
  return kinds;
}

// The random choices of random_fault_plan, drawn from the seed in a fixed
// order: one seed gives one plan on every machine (the chaos tiers' seeds
// name their plans).
struct fault_picker {
  std::mt19937_64 rng;
  const fault_mix& mix;

  uint64_t pick(uint64_t n) { return n == 0 ? 0 : rng() % n; }
  std::string worker() { return to_string(actor_id::worker(static_cast<uint32_t>(pick(mix.workers)))); }
  std::string shard() { return to_string(actor_id::shard(static_cast<uint32_t>(pick(mix.shards)))); }

  // An actor a kill, exit or raise ends (supervisors too when the mix
  // allows, but never raised: they run no handler of keel's).
  std::string actor_to_end(fault_kind kind) {
    std::vector<std::string> names = {"checkpointer"};
    for (uint32_t s = 0; s < mix.shards; ++s)
      names.push_back(to_string(actor_id::shard(s)));
    for (uint32_t w = 0; w < mix.workers; ++w)
      names.push_back(to_string(actor_id::worker(w)));
    if (mix.supervisors && kind != fault_kind::raise)
      for (const char* n : {"shards", "workers", "root"})
        names.push_back(n);
    return names[pick(names.size())];
  }

  // A link or an actor whose messages a drop, duplicate, delay or reorder
  // hits, and how many.
  void message_fault(fault& f) {
    switch (pick(6)) {
      case 0: f.target = worker() + ">" + shard(); break;
      case 1: f.target = shard() + ">" + worker(); break;
      case 2: f.target = shard() + ">checkpointer"; break;
      case 3: f.target = "directory>" + worker(); break;
      case 4: f.target = worker(); break;
      default: f.target = shard(); break;
    }
    f.count = static_cast<uint32_t>(1 + pick(3));
    if (f.kind == fault_kind::delay)
      f.delay_ms = static_cast<uint32_t>(1 + pick(20));
  }

  // Some faults fire at a time or after a number of messages instead:
  // about where the step would have put them.
  void maybe_retime(fault& f) {
    switch (pick(5)) {
      case 0:
        f.when = trigger::time;
        f.at_step = std::max<uint64_t>(1, f.at_step / 2);  // a short run's step takes < 1 ms
        break;
      case 1: {
        constexpr msg_kind per_step[] = {msg_kind::push, msg_kind::pull, msg_kind::ack, msg_kind::reply};
        f.when = trigger::messages;
        f.of = per_step[pick(4)];
        f.at_step = std::max<uint64_t>(1, f.at_step * mix.workers * mix.shards);
        break;
      }
      default:
        break;
    }
  }
};

}  // namespace

std::vector<fault> random_fault_plan(uint64_t seed, const fault_mix& mix) {
  fault_picker p{std::mt19937_64(seed * 0x9E3779B97F4A7C15ull + 1), mix};
  auto kinds = kinds_in(mix);
  std::vector<fault> plan;
  bool stopped_one = false;
  for (uint32_t i = 0; i < mix.faults && !kinds.empty(); ++i) {
    fault f;
    f.kind = kinds[p.pick(kinds.size())];
    if (f.kind == fault_kind::stop && (stopped_one || mix.nodes < 2))
      f.kind = fault_kind::cut;
    f.at_step = mix.first_step + p.pick(mix.last_step - mix.first_step + 1);
    if (f.is_node_fault()) {
      f.target = to_string(actor_id::node(static_cast<uint32_t>(p.pick(mix.nodes))));
      stopped_one = stopped_one || f.kind == fault_kind::stop;
      if (f.kind == fault_kind::cut)
        f.delay_ms = static_cast<uint32_t>(200 + p.pick(1301));
      plan.push_back(f);  // at a step: a node's process has no message counts
      continue;
    }
    if (f.is_kill())
      f.target = p.actor_to_end(f.kind);
    else if (f.is_message_fault())
      p.message_fault(f);
    else if (f.kind == fault_kind::flip)
      f.target = "snapshot";
    else
      f.target = f.kind == fault_kind::tear || p.pick(2) == 0 ? "write" : "fsync";
    if (mix.timed)
      p.maybe_retime(f);
    plan.push_back(f);
  }
  if (mix.membership && mix.nodes > 0) {
    uint32_t joins = 0, drains = 0;
    std::vector<bool> drained(mix.nodes, false);
    for (uint32_t i = 0; i < mix.changes; ++i) {
      fault f;
      f.at_step = mix.first_step + p.pick(mix.last_step - mix.first_step + 1);
      bool drain = p.pick(2) == 0 && drains + 2 < mix.nodes;
      if (!drain && joins >= 2)
        continue;
      if (drain) {
        auto n = static_cast<uint32_t>(p.pick(mix.nodes));
        while (drained[n]) n = (n + 1) % mix.nodes;
        drained[n] = true;
        ++drains;
        f.kind = fault_kind::drain;
        f.target = to_string(actor_id::node(n));
      } else {
        ++joins;
        f.kind = fault_kind::join;  // its node is named below, in step order
      }
      plan.push_back(f);
    }
  }
  std::stable_sort(plan.begin(), plan.end(), [](const fault& a, const fault& b) {
    return a.when != b.when ? a.when < b.when : a.at_step < b.at_step;
  });
  uint32_t next = mix.nodes;
  for (auto& f : plan)
    if (f.kind == fault_kind::join)
      f.target = to_string(actor_id::node(next++));
  return plan;
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
