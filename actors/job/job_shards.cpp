// What each shard of a job is configured with (shard_configs): its key
// ranges, consistency rule and optimizer, its tables and their slot map, and
// its part of the update rules by parameter (training_config::rules,
// checked against the model when the job starts: check_job_rules).
#include <algorithm>
#include <string>

#include "actors/job/job_controller.hpp"
#include "actors/job/placed_job.hpp"
#include "messages/errors.hpp"

namespace keel {

const optimizer_config& rule_of(const training_config& t, const std::string& name) {
  auto it = t.rules.find(name);
  return it == t.rules.end() ? t.optimizer : it->second;
}

// training_config::rules name the layout's tensors and tables; custom
// rules are complete and stay in this process.
caf::error check_job_rules(const placed_job_config& c) {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, std::move(what)); };
  auto check_rule = [&](const optimizer_config& o, const std::string& whose) -> caf::error {
    if (o.kind != optimizer_kind::custom)
      return {};
    if (!o.custom || !o.custom->apply || o.custom->name.empty())
      return bad("job: the custom update rule of " + whose + " needs a name and an apply function");
    if (o.custom->slots > 2)
      return bad("job: custom update rule " + o.custom->name + " keeps " + std::to_string(o.custom->slots) +
                 " state slots per parameter (at most 2)");
    if (c.placement)
      return bad("job: custom update rule " + o.custom->name + " of " + whose +
                 ": a custom rule runs only in the application's process (keel cluster's shards run in node "
                 "processes)");
    return {};
  };
  if (auto err = check_rule(c.training.optimizer, "the job"))
    return err;
  auto& layout = c.training_model->layout();
  for (auto& [name, rule] : c.training.rules) {
    if (!layout.find(name) && !layout.find_table(name)) {
      std::string known;
      for (auto& t : layout.dense()) known += (known.empty() ? "" : ", ") + t.name;
      for (auto& t : layout.tables()) known += (known.empty() ? "" : ", ") + t.name;
      return bad("job: an update rule for \"" + name + "\", which " + c.training_model->name() +
                 " does not have (its dense tensors and tables: " + known + ")");
    }
    if (auto err = check_rule(rule, name))
      return err;
  }
  return {};
}

namespace {

// The shard's part of training_config::rules: its dense keys' spans of the
// named tensors (in key order), and every table's rule when one is named;
// each scaled as the job scales its optimizer (combine mean).
void add_rules(const placed_job_config& c, shard_config& sc) {
  auto scaled = [&](optimizer_config r) {
    if (c.training.combine == gradient_combine::mean)
      r.gradient_scale /= static_cast<float>(c.training.workers);
    return r;
  };
  auto& layout = c.training_model->layout();
  for (auto& t : layout.dense()) {
    auto it = c.training.rules.find(t.name);
    if (it == c.training.rules.end())
      continue;
    uint64_t b = std::max(t.first_key, sc.dense.begin), e = std::min(t.first_key + t.size, sc.dense.end);
    if (b < e)
      sc.dense_rules.push_back({key_range{b, e}, scaled(it->second)});
  }
  bool any_table = false;
  for (auto& t : layout.tables()) any_table |= c.training.rules.count(t.name) > 0;
  if (any_table)
    for (auto& t : layout.tables()) sc.table_rules.push_back(scaled(rule_of(c.training, t.name)));
}

}  // namespace

std::vector<shard_config> shard_configs(const placed_job_config& c, const std::vector<shard_keys>& parts) {
  auto& layout = c.training_model->layout();
  std::vector<uint32_t> slot_owners;
  if (!layout.tables().empty())
    slot_owners = default_slot_owners(c.training.shards);
  std::vector<shard_config> out;
  for (uint32_t i = 0; i < c.training.shards; ++i) {
    shard_config sc;
    sc.shard = i;
    sc.num_workers = c.training.workers;
    sc.dense = parts[i].dense;
    sc.sparse = parts[i].sparse;
    sc.rule = c.training.rule;
    sc.optimizer = c.training.optimizer;
    // Under mean with elastic workers, the workers scale their gradients to
    // each step's count (worker_config::mean_of_step_workers).
    if (c.training.combine == gradient_combine::mean)
      sc.optimizer.gradient_scale /= static_cast<float>(c.training.workers);
    if (c.training.schedule.elastic())
      sc.workers = c.training.schedule;
    add_rules(c, sc);
    sc.tables = layout.tables();
    sc.table_slot_owners = slot_owners;
    sc.limits = c.training.tables;
    out.push_back(std::move(sc));
  }
  return out;
}

}  // namespace keel
