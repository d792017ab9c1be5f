#include "actors/chaos/chaos.hpp"

#include <deque>
#include <map>
#include <filesystem>
#include <random>

#include "actors/core/embedding_table.hpp"
#include "actors/core/hash_slots.hpp"
#include "actors/core/table_snapshot.hpp"
#include "actors/job/job_summary.hpp"
#include "messages/errors.hpp"
#include "models/probe_model.hpp"

namespace keel {

namespace {

// A fresh checkpoint directory per run, removed afterwards.
struct scratch_dir {
  std::filesystem::path path;
  explicit scratch_dir(const std::filesystem::path& base, uint64_t seed) {
    std::random_device rd;
    path = base / ("chaos-" + std::to_string(seed) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Runs one job; a failure's text ends with the last events before it, so a
// hang says what the job was doing.
caf::expected<job_result> run_one(job_config cfg, std::chrono::milliseconds timeout) {
  std::deque<std::string> last;  // before the job: its callback may run until the job goes
  auto j = job::start(std::move(cfg));
  if (!j)
    return j.error();
  (*j)->on_event([&last](const job_event& e) {
    if (e.kind == event_kind::progress)
      return;
    last.push_back(to_string(e));
    if (last.size() > 12)
      last.pop_front();
  });
  auto r = (*j)->wait(timeout);
  if (!r) {
    auto text = describe(r.error());
    text = text.substr(text.find(": ") == std::string::npos ? 0 : text.find(": ") + 2);
    text += "; the last events:";
    for (auto& line : last)
      text += "\n    " + line;
    auto& err = r.error();
    return make_error(err.category() == error_category() ? static_cast<errc>(err.code()) : errc::timeout,
                      text);
  }
  return r;
}

// The digest of shard `shard`'s probe table as it must end: the rows the
// schedule touched that the contiguous slot map gives the shard (the map
// the job uses), each at initial + its touches, built independently of the
// run's shards (a fresh table, one SGD apply of -touches at rate 1).
caf::expected<table_digest> expected_probe_table(const probe_model& probe, uint64_t seed,
                                                 const std::map<uint64_t, uint64_t>& touches,
                                                 const slot_map& map, uint32_t shard) {
  table_config tc;
  tc.name = probe_model::table_name;
  tc.dim = probe_model::table_dim;
  tc.optimizer.kind = optimizer_kind::sgd;
  tc.optimizer.lr = 1.0f;
  tc.slots = map.slots_of(shard);
  auto init = [&probe, seed](uint64_t key, float* v, uint32_t dim) {
    (void)probe.initial_rows(seed, 0, {&key, 1}, {v, dim});
  };
  auto table = embedding_table::make(tc, init);
  if (!table)
    return make_error(errc::invalid_argument, "probe table: " + describe(table.error()));
  std::vector<uint64_t> keys;
  std::vector<float> grads;
  for (auto& [key, n] : touches)
    if (map.shard_of(key) == shard) {
      keys.push_back(key);
      grads.insert(grads.end(), probe_model::table_dim, -static_cast<float>(n));
    }
  if (auto err = table->apply(keys.data(), keys.size(), grads.data(), grads.size(), 1))
    return make_error(errc::invalid_argument, "probe table: " + describe(err));
  return content_sha256(*table);
}

// Exactly once over the probe's table: the run's params_sha256 must be that
// of its dense and sparse values (checked key by key before) with each
// shard's table holding exactly the rows the schedule touched, each at
// initial + touches. The rows stay on the shards; their digests are compared.
caf::error check_probe_table(const probe_model& probe, const job_config& cfg,
                             const job_result& r) {
  const auto& t = cfg.training;
  auto touches = probe.table_touches(t.seed, t.workers, t.batch_size, t.steps);
  if (!touches)
    return touches.error();
  auto map = slot_map::contiguous(default_slot_count, t.shards);
  if (!map)
    return make_error(errc::invalid_argument, "probe table: " + describe(map.error()));
  std::vector<table_digest> digests;
  for (uint32_t s = 0; s < t.shards; ++s) {
    auto d = expected_probe_table(probe, t.seed, *touches, *map, s);
    if (!d)
      return d.error();
    digests.push_back(*d);
  }
  if (params_sha256(r.dense, r.sparse, digests) != r.params_sha256)
    return make_error(errc::invalid_argument,
                      "probe: the table rows differ from the schedule's (" +
                          std::to_string(touches->size()) +
                          " rows, each initial + the pushes that touched it): params_sha256 " +
                          r.params_sha256 + " is not the expected one");
  return {};
}

void check_exactly_once(const job_config& cfg, const job_result& r, chaos_run& out) {
  uint64_t expected = uint64_t{cfg.training.workers} * cfg.training.shards * cfg.training.steps;
  out.lost_updates = static_cast<int64_t>(r.pushes_acked) - static_cast<int64_t>(r.pushes_applied);
  if (r.pushes_acked != expected || r.pushes_applied != expected) {
    out.exactly_once = false;
    out.problem = "acked " + std::to_string(r.pushes_acked) + ", applied " +
                  std::to_string(r.pushes_applied) + ", expected " + std::to_string(expected);
    return;
  }
  if (auto err = check_probe(cfg, r)) {
    out.exactly_once = false;
    out.problem = describe(err);
  }
}

// The time from every kill to its victim's return, for the kills that came
// back (rollbacks a worker asked for are not kills).
void measure_recoveries(const job_summary& s, chaos_run& out) {
  for (auto& rec : s.recoveries)
    if (after_kill(rec) && rec.served_after_us)
      out.recovery_us.emplace_back(rec.kind, *rec.served_after_us);
}

}  // namespace

caf::error check_probe(const job_config& cfg, const job_result& r) {
  auto probe = std::dynamic_pointer_cast<const probe_model>(cfg.training_model);
  if (!probe)
    return {};
  auto err = probe->check({r.dense, r.sparse}, r.pushes_acked / cfg.training.shards);
  if (!err && probe->has_table())
    err = check_probe_table(*probe, cfg, r);
  return err;
}

std::vector<chaos_run> run_chaos(const chaos_options& opts, uint64_t first, uint64_t count,
                                 const std::function<void(const chaos_run&)>& each) {
  auto base_dir = opts.base.checkpoints.dir;
  std::string reference;
  bool bsp = opts.base.training.rule.kind == consistency_kind::bsp;
  if (bsp) {
    scratch_dir dir(base_dir, 0);
    auto cfg = opts.base;
    cfg.checkpoints.dir = dir.path;
    auto clean = run_one(cfg, opts.run_timeout);
    if (clean)
      reference = clean->params_sha256;
  }
  std::vector<chaos_run> runs;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    chaos_run out;
    out.seed = seed;
    auto cfg = opts.base;
    cfg.faults.plan = random_fault_plan(seed, opts.mix);
    out.plan = to_string(cfg.faults.plan);
    out.planned = cfg.faults.plan.size();
    scratch_dir dir(base_dir, seed);
    cfg.checkpoints.dir = dir.path;
    auto t0 = std::chrono::steady_clock::now();
    auto r = run_one(cfg, opts.run_timeout);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r) {
      out.finished = false;
      out.problem = describe(r.error());
    } else {
      out.faults = r->faults_injected;
      out.not_injected = r->faults_not_injected;
      auto summary = summarize(*r);
      out.recoveries = summary.restarts_total + summary.rollbacks;
      measure_recoveries(summary, out);
      check_exactly_once(cfg, *r, out);
      if (bsp && r->params_sha256 != reference) {
        out.bit_identical = false;
        if (out.problem.empty())
          out.problem = "params_sha256 differs from the fault-free run's";
      }
    }
    if (each)
      each(out);
    runs.push_back(std::move(out));
  }
  return runs;
}

}  // namespace keel
