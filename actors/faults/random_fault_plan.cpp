// Random fault plans (keel chaos, the chaos tiers): the families a mix
// draws from, and the plan a seed gives. Parsing and printing plans is
// fault_plan.cpp's.
#include <algorithm>
#include <random>

#include "actors/core/actor_id.hpp"
#include "actors/faults/fault_plan.hpp"
#include "messages/errors.hpp"

namespace keel {

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

}  // namespace keel
