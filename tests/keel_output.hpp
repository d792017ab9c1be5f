#pragma once
// Reading what a `keel train` / `keel cluster` run printed: its
// params_sha256, numbers after labels, and the faults it actually injected
// (the timeline's "fault" lines), as opposed to the faults its plan named.
// A failure-injection test compares the two, so a planned fault that never
// fired fails it. Plain strings, no std::regex (its -Wmaybe-uninitialized
// under ASan breaks the warnings-as-errors build).

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cli_run.hpp"

namespace keel::test {

struct keel_run {
  int status = -1;
  std::string out;  // standard output and standard error
};

// Runs the `keel` program at `binary` with `arguments` to its end (at most
// 120 s: `timeout` ends a hang with SIGKILL).
inline keel_run run_keel_at(const std::string& binary, const std::string& arguments) {
  auto r = run_command("timeout -s KILL 120 " + binary + " " + arguments);
  return {r.status, r.output};
}

// The 64 hex digits after "params_sha256 "; fails the test if there are none.
inline std::string sha_in(const std::string& out) {
  auto at = out.find("params_sha256 ");
  REQUIRE_MESSAGE(at != std::string::npos, out);
  return out.substr(at + 14, 64);
}

// The number right after the first `label` in `out`; fails the test if
// there is none.
inline long number_after(const std::string& out, const std::string& label) {
  auto at = out.find(label);
  REQUIRE_MESSAGE(at != std::string::npos, ("no '" + label + "' in: " + out));
  at += label.size();
  auto end = out.find_first_not_of("0123456789", at);
  REQUIRE_MESSAGE(end > at, out);
  return std::stol(out.substr(at, end - at));
}

// How many times `text` occurs in `out`.
inline size_t occurrences(const std::string& out, const std::string& text) {
  size_t n = 0;
  for (auto at = out.find(text); at != std::string::npos; at = out.find(text, at + 1)) ++n;
  return n;
}

// The lines of `out` that contain `text`.
inline std::vector<std::string> lines_with(const std::string& out, const std::string& text) {
  std::vector<std::string> lines;
  for (auto at = out.find(text); at != std::string::npos;) {
    auto begin = out.rfind('\n', at);
    begin = begin == std::string::npos ? 0 : begin + 1;
    auto end = out.find('\n', at);
    lines.push_back(out.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    at = end == std::string::npos ? end : out.find(text, end);
  }
  return lines;
}

// The faults a run (without --quiet) reports it injected, one timeline line
// each: "[T ms] fault node:1: kill9:node:1@150: the node's process killed
// with SIGKILL" for a node fault, "[T ms] fault shard:0: killed (...)" for an
// actor ended by the plan. Faults that failed ("not killed", "not
// injected") are not counted.
struct injected_faults {
  size_t kill9 = 0, stop = 0, cut = 0;  // node faults, by kind
  size_t actor_kills = 0;               // kill, exit, throw of an actor
  size_t joins = 0, drains = 0;         // membership changes carried out
  size_t node_faults() const { return kill9 + stop + cut; }
  injected_faults& operator+=(const injected_faults& o) {
    joins += o.joins;
    drains += o.drains;
    kill9 += o.kill9;
    stop += o.stop;
    cut += o.cut;
    actor_kills += o.actor_kills;
    return *this;
  }
};

inline injected_faults injected_in(const std::string& out) {
  injected_faults n;
  for (auto& line : lines_with(out, " ms] fault ")) {
    if (line.find("the node's process killed with SIGKILL") != std::string::npos)
      ++n.kill9;
    else if (line.find("the node's process stopped with SIGSTOP") != std::string::npos)
      ++n.stop;
    else if (line.find("the node's process stopped, to continue later") != std::string::npos)
      ++n.cut;
    else if (line.find(": killed (") != std::string::npos)
      ++n.actor_kills;
  }
  for (auto& line : lines_with(out, " ms] membership ")) {
    if (line.find(": join:node:") != std::string::npos)
      ++n.joins;
    else if (line.find(": drain:node:") != std::string::npos)
      ++n.drains;
  }
  return n;
}

// The faults of a plan's text ("kill9:node:1@150,kill:shard:0@40,..."), by
// the same kinds.
inline injected_faults planned_in(const std::string& plan) {
  injected_faults n;
  size_t from = 0;
  while (from < plan.size()) {
    auto comma = plan.find(',', from);
    auto item = plan.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (item.rfind("kill9:node:", 0) == 0)
      ++n.kill9;
    else if (item.rfind("stop:node:", 0) == 0)
      ++n.stop;
    else if (item.rfind("cut:node:", 0) == 0)
      ++n.cut;
    else if (item.rfind("kill:", 0) == 0 || item.rfind("exit:", 0) == 0 || item.rfind("throw:", 0) == 0)
      ++n.actor_kills;
    else if (item.rfind("join:node:", 0) == 0)
      ++n.joins;
    else if (item.rfind("drain:node:", 0) == 0)
      ++n.drains;
    from = comma == std::string::npos ? plan.size() : comma + 1;
  }
  return n;
}

// The plan a --random-faults run printed ("random faults from seed S: PLAN").
inline std::string random_plan_in(const std::string& out) {
  const std::string label = "random faults from seed ";
  auto at = out.find(label);
  REQUIRE_MESSAGE(at != std::string::npos, out);
  auto colon = out.find(": ", at + label.size());
  REQUIRE_MESSAGE(colon != std::string::npos, out);
  return out.substr(colon + 2, out.find('\n', colon) - colon - 2);
}

// Checks that every fault `plan` names was injected in `out`: the timeline
// shows each, kind by kind, and the run's own account ("planned faults: N
// injected, 0 not") agrees.
inline void check_every_planned_fault_fired(const std::string& plan, const std::string& out) {
  auto planned = planned_in(plan);
  auto fired = injected_in(out);
  INFO("plan: " << plan);
  CHECK_MESSAGE(fired.kill9 == planned.kill9, out);
  CHECK_MESSAGE(fired.stop == planned.stop, out);
  CHECK_MESSAGE(fired.cut == planned.cut, out);
  CHECK_MESSAGE(fired.actor_kills == planned.actor_kills, out);
  CHECK_MESSAGE(fired.joins == planned.joins, out);
  CHECK_MESSAGE(fired.drains == planned.drains, out);
  auto items = static_cast<long>(occurrences(plan, ",") + 1);
  CHECK_MESSAGE(number_after(out, "planned faults: ") == items, out);
  CHECK_MESSAGE(out.find(" injected, 0 not\n") != std::string::npos, out);
}

}  // namespace keel::test
