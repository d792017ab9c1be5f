// The supervision tree a job runs, and why it has this shape. Its child ids
// and directory names are actor ids as text (actors/core/actor_id.hpp):
// supervision/ knows nothing of keel's actors, so its names stay strings.
//
//
//   root (one_for_one)
//   ├── checkpointer                 permanent
//   ├── shards (one_for_one)         permanent supervisor
//   │   └── shard:0 .. shard:N-1     permanent, restart from the last
//   │                                committed snapshot
//   └── workers (one_for_one)        permanent supervisor
//       └── worker:0 .. worker:W-1   transient (a finished worker stays down)
//
// one_for_one everywhere because every child recovers alone: a restarted
// shard is brought back to the present by the workers' replay logs, a
// restarted worker asks the shards where it stood, and a restarted
// checkpointer reopens the store. Restarting siblings would only lose work.
// When local recovery is impossible (a shard needs pushes no log holds any
// more, or the root itself is lost) the job rolls the whole tree back to the
// last valid checkpoint (job.cpp).
#include "actors/core/shard_snapshot.hpp"
#include "actors/job/job_impl.hpp"
#include "actors/job/placement.hpp"
#include "actors/ps/checkpointer.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "storage/faulty_io.hpp"
#include "storage/snapshot.hpp"

namespace keel {

namespace {

// Accepts a snapshot only if this shard could restore from it.
supervision::snapshot_validator shard_validator(const shard_config& cfg) {
  return [cfg](const supervision::snapshot& s) -> caf::error {
    auto f = s.as<frame>();
    if (!f)
      return make_error(errc::damaged_snapshot, "not a shard snapshot");
    return check_shard_snapshot(cfg, f);
  };
}

supervision::child_spec shard_spec(job::impl& j, uint32_t i) {
  supervision::child_spec c;
  c.id = to_string(actor_id::shard(i));
  auto cfg = j.shard_cfgs[i];
  auto model = j.cfg.training_model;
  auto seed = j.cfg.seed;
  auto every = j.cfg.checkpoint_every;
  frame_ptr initial = i < j.start_from.size() ? j.start_from[i] : nullptr;
  auto committed = j.checkpoints->snapshots();
  auto validate = shard_validator(cfg);
  auto faults = j.faults->links();
  auto placement = j.cfg.placement;
  c.start = [=](caf::actor_system& sys, const supervision::restart_context& ctx) {
    parameter_shard_config o;
    o.core = cfg;
    // The supervisor hands over a snapshot its validator (validate: every
    // CRC) accepted; the restore need not check the CRCs again.
    auto snapshot = ctx.from.as<frame>();
    // A first start of a restarted shard supervisor has no snapshot from its
    // supervisor, but the job's last committed checkpoint is still the state
    // to continue from.
    if (!snapshot)
      snapshot = supervision::choose_snapshot(committed->for_shard(i), validate).chosen.as<frame>();
    parameter_shard_env env;
    env.snapshot_crcs_checked = snapshot != nullptr;
    env.faults = faults;
    if (!snapshot)
      snapshot = initial;
    if (snapshot) {
      o.snapshot = shard_snapshot_msg(snapshot);
    } else {
      o.initial_dense.resize(cfg.dense.size());
      model->initial_dense(seed, cfg.dense.begin, o.initial_dense);
    }
    o.snapshot_every_steps = every;
    o.directory = ctx.directory;
    if (placement)
      return placement->start_shard(sys, ctx.incarnation, o);
    return spawn_parameter_shard(sys, std::move(o), std::move(env));
  };
  c.restart = supervision::restart_type::permanent;
  c.shutdown = supervision::shutdown_policy::after(std::chrono::seconds(5));
  c.snapshots = [committed, i](const std::string&) { return committed->for_shard(i); };
  c.validate = validate;
  return c;
}

supervision::child_spec worker_spec(job::impl& j, uint32_t i) {
  supervision::child_spec c;
  c.id = to_string(actor_id::worker(i));
  worker_config o;
  o.core.worker = i;
  o.core.epoch = j.epoch;
  o.core.parts = j.parts;
  for (uint32_t s = 0; s < j.cfg.shards; ++s)
    o.core.shard_names.push_back(to_string(actor_id::shard(s)));
  o.core.total_steps = j.cfg.steps;
  o.core.rule = j.cfg.rule.kind;
  o.core.windowed = j.cfg.checkpoint_every > 0;
  o.num_workers = j.cfg.workers;
  o.job = caf::actor_cast<caf::actor>(*j.ctl);
  o.seed = j.cfg.seed;
  o.batch_size = j.cfg.batch_size;
  o.request_timeout = j.cfg.request_timeout;
  worker_env env;
  env.training_model = j.cfg.training_model;
  env.faults = j.faults->links();
  c.start = [o, env, placement = j.cfg.placement](caf::actor_system& sys,
                                                   const supervision::restart_context& ctx) mutable {
    o.directory = ctx.directory;
    if (placement)
      return placement->start_worker(sys, ctx.incarnation, o);
    return spawn_worker(sys, o, env);
  };
  c.restart = supervision::restart_type::transient;
  c.shutdown = supervision::shutdown_policy::after(std::chrono::seconds(5));
  return c;
}

}  // namespace

supervision::supervisor_spec job::impl::root_spec() {
  supervision::supervisor_spec shards;
  shards.name = to_string(actor_id::shards());
  shards.max_restarts = cfg.max_restarts;
  shards.period = cfg.restart_period;
  for (uint32_t i = 0; i < cfg.shards; ++i)
    shards.children.push_back(shard_spec(*this, i));

  supervision::supervisor_spec workers;
  workers.name = to_string(actor_id::workers());
  workers.max_restarts = cfg.max_restarts;
  workers.period = cfg.restart_period;
  for (uint32_t i = 0; i < cfg.workers; ++i)
    workers.children.push_back(worker_spec(*this, i));

  supervision::child_spec ckpt;
  ckpt.id = to_string(actor_id::checkpointer());
  checkpointer_config co;
  co.dir = cfg.checkpoint_dir.string();
  co.keep_last = cfg.keep_checkpoints;
  co.num_shards = cfg.shards;
  co.job = caf::actor_cast<caf::actor>(*ctl);
  co.incomplete_timeout = cfg.checkpoint_timeout;
  checkpointer_env env;
  env.io = faults->disk();
  env.detached = !cfg.placement;  // see checkpointer_env::detached
  ckpt.start = [co, env](caf::actor_system& sys, const supervision::restart_context&) {
    return spawn_checkpointer(sys, co, env);
  };
  ckpt.shutdown = supervision::shutdown_policy::after(std::chrono::seconds(10));

  supervision::supervisor_spec root;
  root.name = to_string(actor_id::root());
  root.max_restarts = cfg.max_restarts;
  root.period = cfg.restart_period;
  root.random_seed = cfg.seed;
  root.children.push_back(std::move(ckpt));
  root.children.push_back(supervision::supervisor_child(std::move(shards)));
  root.children.push_back(supervision::supervisor_child(std::move(workers)));
  return root;
}

caf::error job::impl::start_tree() {
  handles.clear();
  done.clear();
  reports.clear();
  worker_step.assign(cfg.workers, 0);
  auto t = supervision::tree::start(*sys, root_spec());
  if (!t)
    return t.error();
  tree.emplace(std::move(*t));
  auto& self = *ctl;
  self->monitor(tree->root());
  self->send(tree->events(), supervision::subscribe_atom::value);
  std::vector<actor_id> watched = {actor_id::checkpointer(), actor_id::shards(), actor_id::workers()};
  for (uint32_t i = 0; i < cfg.shards; ++i) watched.push_back(actor_id::shard(i));
  for (uint32_t i = 0; i < cfg.workers; ++i) watched.push_back(actor_id::worker(i));
  for (auto id : watched)
    self->send(tree->directory(), supervision::watch_atom::value, to_string(id));
  return {};
}

}  // namespace keel
