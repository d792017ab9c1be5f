// What a shard_config says beyond its fields (shard_core.hpp): the slots of
// the tables' slot map it owns, each table's configuration, and its update
// rules by parameter (how many slot arrays its dense keys need, their
// initial values, whether its rules are whole). The runs of one rule are
// for_each_rule_run's, in the header, inlined into the shard's updates.
#include <algorithm>
#include <string>

#include "actors/core/count_min_sketch.hpp"
#include "actors/core/shard_core.hpp"
#include "actors/core/update_rules.hpp"
#include "messages/errors.hpp"

namespace keel {

std::vector<uint32_t> default_slot_owners(uint32_t shards) {
  auto map = slot_map::contiguous(default_slot_count, shards);
  return map ? map->owners() : std::vector<uint32_t>{};
}

slot_set owned_slots(const std::vector<uint32_t>& slot_owners, uint32_t shard) {
  slot_set s(static_cast<uint32_t>(slot_owners.size()));
  for (uint32_t i = 0; i < slot_owners.size(); ++i)
    if (slot_owners[i] == shard)
      s.add(i);
  return s;
}

static_assert(max_admit_after == count_min_sketch::max_count, "table_limits' bound is the sketch's");

table_config shard_table_config(const shard_config& cfg, uint32_t t) {
  table_config tc;
  tc.name = cfg.tables.at(t).name;
  tc.dim = cfg.tables.at(t).dim;
  tc.optimizer = cfg.table_rules.empty() ? cfg.optimizer : cfg.table_rules.at(t);
  tc.slots = owned_slots(cfg.table_slot_owners, cfg.shard);
  tc.capacity_rows = cfg.limits.capacity_rows;
  tc.eviction = cfg.limits.eviction;
  tc.admission.min_pushes = cfg.limits.admit_after;
  return tc;
}

size_t dense_slots(const shard_config& cfg) {
  size_t slots = 0;
  for_each_rule_run(cfg, cfg.dense.begin, cfg.dense.size(),
                    [&](const optimizer_config& rule, uint64_t, uint64_t) { slots = std::max(slots, slots_of(rule)); });
  return slots;
}

caf::error check_rules(const shard_config& cfg) {
  auto bad = [&](std::string what) {
    return make_error(errc::invalid_argument, "shard " + std::to_string(cfg.shard) + ": " + what);
  };
  auto check = [&](const optimizer_config& r, const std::string& whose) -> caf::error {
    if (r.kind != optimizer_kind::custom)
      return {};
    if (!r.custom || !r.custom->apply)
      return bad("the custom update rule of " + whose +
                 " is not in this process (a custom rule runs only in the process that made it)");
    if (r.custom->slots > 2)
      return bad("custom update rule " + r.custom->name + " of " + whose + " keeps " +
                 std::to_string(r.custom->slots) + " state slots (at most 2)");
    return {};
  };
  if (auto err = check(cfg.optimizer, "the shard"))
    return err;
  uint64_t at = cfg.dense.begin;
  for (auto& r : cfg.dense_rules) {
    if (r.keys.begin < at || r.keys.end > cfg.dense.end || r.keys.begin >= r.keys.end)
      return bad("rule span [" + std::to_string(r.keys.begin) + ", " + std::to_string(r.keys.end) +
                 ") is not inside the dense range, after the span before it");
    if (auto err = check(r.rule, "dense keys [" + std::to_string(r.keys.begin) + ", " + std::to_string(r.keys.end) + ")"))
      return err;
    at = r.keys.end;
  }
  if (!cfg.table_rules.empty() && cfg.table_rules.size() != cfg.tables.size())
    return bad(std::to_string(cfg.table_rules.size()) + " table rules for " + std::to_string(cfg.tables.size()) +
               " tables");
  for (size_t t = 0; t < cfg.table_rules.size(); ++t)
    if (auto err = check(cfg.table_rules[t], "table " + cfg.tables[t].name))
      return err;
  return {};
}

void initial_dense_slots(const shard_config& cfg, std::vector<float>& slot1, std::vector<float>& slot2) {
  std::vector<float>* arrays[] = {&slot1, &slot2};
  for (size_t i = 0; i < dense_slots(cfg); ++i) {
    arrays[i]->assign(cfg.dense.size(), 0.0f);
    for_each_rule_run(cfg, cfg.dense.begin, cfg.dense.size(), [&](const optimizer_config& rule, uint64_t b, uint64_t n) {
      std::fill_n(arrays[i]->data() + (b - cfg.dense.begin), n, initial_slot(rule, i));
    });
  }
}

}  // namespace keel
