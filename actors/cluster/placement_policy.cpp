#include "actors/cluster/placement_policy.hpp"

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace keel {

namespace {

// How far `node` lies after `from` going round the ring of `n` nodes.
uint32_t after(uint32_t from, uint32_t node, uint32_t n) {
  return (node + n - from % n) % n;
}

}  // namespace

std::vector<uint32_t> placement_policy::candidates(actor_id child, uint64_t incarnation,
                                                   uint32_t preferred) const {
  const uint32_t n = nodes();
  std::vector<uint32_t> live;
  for (uint32_t i = 0; i < n; ++i)
    if (takes(i, child))
      live.push_back(i);
  if (live.empty())
    return live;
  auto previous = node_of(child);
  const bool first = incarnation <= 1;
  const uint32_t from = !first && previous ? *previous : preferred % n;
  // Loads without the child itself: it leaves the node it ran on.
  std::vector<node_load> loads(n);
  for (uint32_t i = 0; i < n; ++i)
    loads[i] = load(i);
  if (previous) {
    auto& l = loads[*previous];
    if (child.is(actor_kind::shard)) {
      l.shard_bytes -= std::min(l.shard_bytes, weight(child));
      --l.shards;
    } else if (child.is(actor_kind::worker)) {
      --l.workers;
    }
  }
  // Bytes count in quanta: a few bytes more on one node must not outweigh
  // a child more on the other.
  const uint64_t quantum = this->quantum();
  uint64_t least = UINT64_MAX;
  for (auto i : live) least = std::min(least, loads[i].shard_bytes);
  auto key = [&](uint32_t i) {
    const auto& l = loads[i];
    bool last = !first && previous && *previous == i;  // may be dead unseen
    bool front = first && i == preferred % n;
    uint64_t bytes = (l.shard_bytes - least) / quantum;
    uint64_t primary = child.is(actor_kind::worker) ? l.workers : bytes;
    uint64_t secondary = child.is(actor_kind::worker) ? bytes : l.children();
    return std::make_tuple(last, !front, primary, secondary, after(from, i, n));
  };
  std::sort(live.begin(), live.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  return live;
}

uint32_t placement_policy::add_node() {
  alive_.push_back(true);
  draining_.push_back(false);
  serves_.emplace_back();
  return nodes() - 1;
}

bool placement_policy::serves(uint32_t node, uint32_t worker) const {
  if (node >= serves_.size())
    return false;
  auto& w = serves_[node];
  return std::find(w.begin(), w.end(), worker) != w.end();
}

bool placement_policy::takes(uint32_t node, actor_id child) const {
  if (!eligible(node))
    return false;
  if (child.is(actor_kind::worker) && client_loops_)
    return serves(node, child.index);
  if (client(node))
    return false;
  if (child.is(actor_kind::worker) && worker_slots_ > 0) {
    auto at = node_of(child);
    auto here = load(node).workers - (at && *at == node ? 1 : 0);
    return here < worker_slots_;
  }
  return true;
}

std::vector<std::pair<actor_id, uint32_t>> placement_policy::rebalance() const {
  std::vector<std::pair<actor_id, uint32_t>> moves;
  std::vector<uint32_t> nodes_in;
  for (uint32_t i = 0; i < nodes(); ++i)
    if (eligible(i) && !client(i))  // a client's workers never move
      nodes_in.push_back(i);
  if (nodes_in.size() < 2)
    return moves;
  auto sim = *this;  // moves applied as they are planned
  auto extreme = [&](auto load_of, bool most) {
    uint32_t best = nodes_in.front();
    for (auto i : nodes_in)
      if (most ? load_of(i) > load_of(best) : load_of(i) < load_of(best))
        best = i;
    return best;
  };
  const size_t bound = placed_.size();  // each move lowers the spread: a bound, not a budget
  const uint64_t q = quantum();
  for (size_t k = 0; k < bound; ++k) {
    auto bytes = [&](uint32_t i) { return sim.load(i).shard_bytes; };
    auto from = extreme(bytes, true), to = extreme(bytes, false);
    uint64_t spread = bytes(from) - bytes(to);
    // A move must lower the spread by a quantum at least: shards that
    // differ by a few bytes (a delta's length) stay where they are.
    std::optional<actor_id> pick;
    for (auto child : sim.children_of(from))
      if (child.is(actor_kind::shard) && sim.weight(child) + q <= spread &&
          (!pick || sim.weight(child) > sim.weight(*pick)))
        pick = child;
    if (!pick)
      break;
    sim.place(*pick, to);
    moves.emplace_back(*pick, to);
  }
  for (size_t k = 0; k < bound && !client_loops_; ++k) {
    auto workers = [&](uint32_t i) { return sim.load(i).workers; };
    auto from = extreme(workers, true), to = extreme(workers, false);
    if (workers(from) <= workers(to) + 1)
      break;
    auto children = sim.children_of(from);
    auto last = std::find_if(children.rbegin(), children.rend(),
                             [](actor_id c) { return c.is(actor_kind::worker); });
    sim.place(*last, to);
    moves.emplace_back(*last, to);
  }
  return moves;
}

void placement_policy::place(actor_id child, uint32_t node) {
  placed_[child] = node;
}

void placement_policy::forget(actor_id child) {
  placed_.erase(child);
}

void placement_policy::weigh(actor_id shard, uint64_t bytes) {
  bytes_[shard] = bytes;
}

void placement_policy::estimate(actor_id shard, uint64_t bytes) {
  bytes_.emplace(shard, bytes);
}

std::optional<uint32_t> placement_policy::node_of(actor_id child) const {
  auto it = placed_.find(child);
  if (it == placed_.end())
    return std::nullopt;
  return it->second;
}

node_load placement_policy::load(uint32_t node) const {
  node_load l;
  for (auto& [child, at] : placed_) {
    if (at != node)
      continue;
    if (child.is(actor_kind::shard)) {
      ++l.shards;
      l.shard_bytes += weight(child);
    } else if (child.is(actor_kind::worker)) {
      ++l.workers;
    }
  }
  return l;
}

std::vector<actor_id> placement_policy::children_of(uint32_t node) const {
  std::vector<actor_id> out;
  for (auto& [child, at] : placed_)
    if (at == node)
      out.push_back(child);
  return out;
}

uint64_t placement_policy::quantum() const {
  uint64_t total = 0;
  for (auto& [shard, bytes] : bytes_) total += bytes;
  return std::max<uint64_t>(1, bytes_.empty() ? 1 : total / bytes_.size() / 4);
}

uint64_t placement_policy::weight(actor_id child) const {
  auto it = bytes_.find(child);
  return it == bytes_.end() ? 0 : it->second;
}

uint64_t estimated_shard_bytes(uint64_t values, uint32_t slots) {
  return values * (1 + uint64_t{slots}) * sizeof(float);
}

std::string readable_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 1000000)
    std::snprintf(buf, sizeof(buf), "%.1f kB", static_cast<double>(bytes) / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

std::string describe_load(const node_load& load) {
  return std::to_string(load.shards) + (load.shards == 1 ? " shard (" : " shards (") +
         readable_bytes(load.shard_bytes) + ") and " + std::to_string(load.workers) +
         (load.workers == 1 ? " worker" : " workers");
}

std::string describe_client(const placement_policy& p, uint32_t node) {
  std::string out;
  for (auto w : p.served(node))
    out += (out.empty() ? "it runs the loops of " : ", ") + to_string(actor_id::worker(w));
  return out;
}

}  // namespace keel
