#include "actors/faults/recovery.hpp"

#include <cstdio>
#include <map>

#include "actors/core/actor_id.hpp"

namespace keel {

namespace {

// Whether replays to `shard` belong to a recovery of `victim`: the shard
// itself, or a supervisor whose restart restarted it.
bool covers(const std::string& victim, const std::string& shard) {
  auto v = parse_actor_id(victim);
  auto s = parse_actor_id(shard);
  return victim == shard ||
         (v && (v->is(actor_kind::root) || (v->is(actor_kind::shards) && s && s->is(actor_kind::shard))));
}

bool receives_replays(const recovery& r) {
  return r.kind == "shard" || r.victim == "shards" || r.victim == "root";
}

// What a restart restored from: its snapshot's label, or "fresh".
std::string restarted_from(const job_event& e) {
  return e.snapshot.empty() ? "fresh" : e.snapshot;
}

// The checkpoint a "restored" event of root went back to
// ("checkpoint 3 at step 40"), or "fresh".
std::string rolled_back_to(const job_event& e) {
  if (e.checkpoint == 0)
    return "fresh";
  return "checkpoint " + std::to_string(e.checkpoint) + " at step " + std::to_string(e.step);
}

// Walks the timeline once. `waiting` holds the recoveries whose victim has
// not come back yet; `serving` the latest recovery of each victim that has,
// with the position of its return, so that a replay goes to the most recent
// recovery covering the shard it names.
class timeline_reader {
 public:
  std::vector<recovery> done() && { return std::move(out_); }

  void read(const job_event& e, size_t position) {
    if (e.kind == event_kind::fault && e.killed)
      begin(e.actor, e.detail, e.at_us, true);
    else if (e.kind == event_kind::rollback && e.actor == "root" && !waiting_.count("root"))
      begin("root", e.detail, e.at_us, false);  // asked for by a worker, not caused by a kill of root
    else if (e.kind == event_kind::restart) {
      come_back(e.actor, e.at_us, restarted_from(e), position);
      child_back(e.actor, e.at_us, position);
    }
    else if (e.kind == event_kind::restored && e.actor == "root")
      roll_back(e, position);
    else if (e.kind == event_kind::replay)
      count_replay(e);
    else if (e.kind == event_kind::node_down)
      node_down(e);
  }

 private:
  struct back {
    size_t index;     // into out_
    size_t position;  // of the event that brought it back
  };

  void begin(const std::string& victim, const std::string& fault, int64_t at_us, bool killed) {
    recovery r;
    r.victim = victim;
    r.killed = killed;
    r.kind = recovery_kind(victim);
    r.fault = fault;
    r.fault_at_us = at_us;
    waiting_[victim].push_back(out_.size());
    serving_.erase(victim);  // its replays from now on belong to this recovery
    out_.push_back(std::move(r));
  }

  // A node the plan faulted is seen down: its recovery waits for the
  // children it ran (listed in the event, comma-separated) to restart.
  void node_down(const job_event& e) {
    auto it = waiting_.find(e.actor);
    if (it == waiting_.end() || it->second.empty())
      return;
    auto& r = out_[it->second.back()];
    r.detected_after_us = e.at_us - r.fault_at_us;
    for (size_t pos = 0; pos < e.peer.size();) {
      auto comma = e.peer.find(',', pos);
      auto child = e.peer.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (!child.empty()) {
        r.children.push_back(child);
        node_of_[child] = e.actor;
      }
      if (comma == std::string::npos)
        break;
      pos = comma + 1;
    }
    if (r.children.empty())
      come_back(e.actor, e.at_us, "its children", 0);
  }

  // A child of a lost node restarted: the node's recovery ends with the last.
  void child_back(const std::string& child, int64_t at_us, size_t position) {
    auto n = node_of_.find(child);
    if (n == node_of_.end())
      return;
    auto node = n->second;
    node_of_.erase(n);
    for (auto& [c, owner] : node_of_)
      if (owner == node)
        return;  // more to come
    come_back(node, at_us, "restarted elsewhere", position);
  }

  void come_back(const std::string& victim, int64_t at_us, const std::string& from, size_t position,
                 bool rolled_back = false) {
    auto it = waiting_.find(victim);
    if (it == waiting_.end() || it->second.empty())
      return;
    for (auto i : it->second) {
      out_[i].served_after_us = at_us - out_[i].fault_at_us;
      out_[i].restored_from = from;
      out_[i].rolled_back = rolled_back;
    }
    serving_[victim] = {it->second.back(), position};
    waiting_.erase(it);
  }

  // A rolled-back tree restarts every actor: whoever was still waiting is
  // back, and replays to the new tree count toward the rollback.
  void roll_back(const job_event& e, size_t position) {
    auto from = rolled_back_to(e);
    std::vector<std::string> victims;
    for (auto& entry : waiting_) victims.push_back(entry.first);
    for (auto& victim : victims) come_back(victim, e.at_us, from, position, true);
    auto root = serving_.find("root");
    if (root == serving_.end() || root->second.position != position) {
      serving_.clear();
      return;
    }
    auto kept = root->second;
    serving_.clear();
    serving_["root"] = kept;
  }

  void count_replay(const job_event& e) {
    const auto& shard = e.peer;
    const back* latest = nullptr;
    for (auto& [victim, b] : serving_)
      if (covers(victim, shard) && (!latest || b.position > latest->position))
        latest = &b;
    if (latest)
      out_[latest->index].replayed += e.count;
  }

  std::vector<recovery> out_;
  std::map<std::string, std::vector<size_t>> waiting_;
  std::map<std::string, back> serving_;
  std::map<std::string, std::string> node_of_;  // a lost node's child -> the node
};

std::string milliseconds(int64_t us, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, static_cast<double>(us) / 1000.0);
  return buf;
}

}  // namespace

std::string recovery_kind(const std::string& name) {
  auto id = parse_actor_id(name);
  if (!id)
    return name;
  if (id->is(actor_kind::shards) || id->is(actor_kind::workers))
    return "supervisor";
  return to_string(id->kind);
}

std::vector<recovery> recoveries(const std::vector<job_event>& timeline) {
  timeline_reader reader;
  for (size_t i = 0; i < timeline.size(); ++i) reader.read(timeline[i], i);
  return std::move(reader).done();
}

bool after_kill(const recovery& r) {
  return r.killed;
}

std::string to_string(const recovery& r) {
  std::string s = r.victim + (after_kill(r) ? " " + r.fault : " rollback (" + r.fault + ")") +
                  " at " + milliseconds(r.fault_at_us, "%.1f") + " ms: ";
  if (!r.served_after_us)
    return s + "did not come back";
  s += "serving again after " + milliseconds(*r.served_after_us, "%.2f") + " ms, ";
  if (r.rolled_back)
    s += r.restored_from == "fresh" ? "rolled back to step 0 (no valid checkpoint)"
                                    : "rolled back to " + r.restored_from;
  else if (r.kind == "supervisor")
    s += "restarted with its children";  // a supervisor holds no state of its own
  else if (r.kind == "node")
    s += std::to_string(r.children.size()) + " children restarted on the other nodes" +
         (r.detected_after_us ? " (seen down after " + milliseconds(*r.detected_after_us, "%.1f") +
                                  " ms)"
                              : "");
  else if (r.restored_from == "fresh")
    s += "restarted fresh";
  else
    s += "restored from snapshot " + r.restored_from;
  if (receives_replays(r))
    s += ", " + std::to_string(r.replayed) + (r.replayed == 1 ? " push" : " pushes") + " replayed";
  return s;
}

}  // namespace keel
