// The supervision tree a job runs, and why it has this shape. Its child ids
// and directory names are actor ids as text (actors/core/actor_id.hpp):
// supervision/ knows nothing of keel's actors, so its names stay strings.
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
// last valid checkpoint (job_recovery.cpp).
//
// The controller starts and stops trees without waiting: a tree is up when
// its root answers which_children, down when the controller sees its root's
// down message. Here too is what the controller tells the running tree: the
// checkpoint window and the commits' fan-out.
#include "actors/core/actor_id.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/job/job_controller.hpp"
#include "actors/job/placement.hpp"
#include "actors/ps/checkpointer.hpp"
#include "actors/ps/parameter_shard.hpp"
#include "messages/errors.hpp"
#include "supervision/directory.hpp"
#include "supervision/events.hpp"
#include "supervision/own_thread_start.hpp"
#include "storage/faulty_io.hpp"
#include "storage/snapshot.hpp"

namespace keel {

namespace {

// Whether worker `w` left before step `first` (its span ends there or before).
bool left_before(const worker_schedule& s, uint32_t w, uint64_t first) {
  return s.elastic() && w < s.slots() && !s.reserved(w) && s.span(w).end <= first;
}

// Accepts a snapshot ref whose files (a delta's chain too) are there with
// the lengths committed. The
// coordinator reads no snapshot bytes: the shard reads its file (every
// byte's CRC, the very file committed, its run and layout) and falls back
// to the older refs itself (spawn_parameter_shard), on its node.
supervision::snapshot_validator shard_validator(std::shared_ptr<file_io> io) {
  return [io](const supervision::snapshot& s) -> caf::error {
    auto ref = s.as<snapshot_ref>();
    if (!ref)
      return make_error(errc::damaged_snapshot, "not a shard snapshot ref");
    // Every file of a delta's chain too: the shard reads them all.
    for (auto& l : chain_files(*ref)) {
      auto f = io->open(std::filesystem::path(ref->dir) / l.file);
      if (!f)
        return make_error(errc::damaged_snapshot, l.file + ": " + describe(f.error()));
      auto size = (*f)->size();
      if (!size || *size != l.bytes)
        return make_error(errc::damaged_snapshot, l.file + ": holds " +
                                                    (size ? std::to_string(*size) : describe(size.error())) +
                                                    " bytes, the manifest says " + std::to_string(l.bytes));
    }
    return {};
  };
}

// What shard `i` restores from, newest first: the ref its supervisor chose
// (on a first start, when its supervisor itself restarted, chosen here from
// the committed ones) and the committed ones older than it; with none
// valid, the checkpoint the tree starts from, if any.
std::vector<snapshot_ref> restore_candidates(const committed_snapshots& committed, uint32_t i,
                                             const supervision::restart_context& ctx,
                                             const supervision::snapshot_validator& validate,
                                             const std::optional<snapshot_ref>& initial) {
  auto chosen = ctx.from.as<snapshot_ref>();
  if (!chosen)
    chosen = supervision::choose_snapshot(committed.for_shard(i), validate).chosen.as<snapshot_ref>();
  std::vector<snapshot_ref> refs;
  if (!chosen) {
    if (initial)
      refs.push_back(*initial);
    return refs;
  }
  refs.push_back(*chosen);
  for (auto& s : committed.for_shard(i))
    if (auto r = s.as<snapshot_ref>(); r && r->checkpoint < chosen->checkpoint)
      refs.push_back(*r);
  return refs;
}

supervision::child_spec shard_spec(const controller_state& j, uint32_t i) {
  supervision::child_spec c;
  c.id = to_string(actor_id::shard(i));
  auto cfg = j.run.shard_cfgs[i];
  auto model = j.cfg.training_model;
  auto seed = j.cfg.training.seed;
  auto& ckpts = j.cfg.checkpoints;
  auto every = ckpts.every;
  // Absolute: a shard on another node reads and writes the same directory.
  auto dir = ckpts.dir.empty() ? std::string() : std::filesystem::absolute(ckpts.dir).string();
  auto retry = std::make_pair(ckpts.retry_min, ckpts.retry_max);
  auto incremental = ckpts.incremental;
  auto stream_above = ckpts.stream_above_bytes;
  auto initial = i < j.run.start_from.size() ? std::optional<snapshot_ref>(j.run.start_from[i]) : std::nullopt;
  auto committed = j.progress.checkpoints->snapshots();
  std::shared_ptr<file_io> io = j.faults->disk();
  auto faults = j.faults->links();
  auto placement = j.cfg.placement;
  auto epochs = j.shard_epochs;
  auto run = j.run.identity;
  auto validate = shard_validator(io ? io : posix_io());
  auto workers = j.workers_now;
  auto replica = j.run.replica;
  std::shared_ptr<const replica_store> replicas = j.run.replicas;
  c.start = [=](caf::actor_system& sys, const supervision::restart_context& ctx) {
    parameter_shard_config o;
    o.core = cfg;
    if (auto now = workers->get(); now.elastic())  // changed at runtime, maybe
      o.core.workers = now;
    o.seed = seed;
    // Fencing: a greater epoch than any earlier incarnation of any shard, so
    // one that outlives its replacement (a healed partition) is refused.
    o.epoch = ++*epochs;
    o.run_id = run.run_id;
    o.config_hash = run.config_hash;
    o.restore_from = restore_candidates(*committed, i, ctx, validate, initial);
    parameter_shard_env env;
    env.faults = faults;
    env.io = io;
    o.peer_replica = o.restore_replica = replica;
    env.local_replica = replicas;
    if (!cfg.tables.empty())
      env.table_rows = model_table_rows(model, seed);
    // Also with refs: a shard none of whose refs validates starts fresh
    // (and the workers' logs then call for a rollback).
    o.initial_dense.resize(cfg.dense.size());
    model->initial_dense(seed, cfg.dense.begin, o.initial_dense);
    o.snapshot_every_steps = every;
    o.checkpoint_dir = dir;
    o.retry_min = retry.first;
    o.retry_max = retry.second;
    o.chain = incremental;
    o.stream_above_bytes = stream_above;
    o.directory = ctx.directory;
    if (placement)
      return placement->start_shard(sys, ctx.incarnation, o);
    return spawn_parameter_shard(sys, std::move(o), std::move(env));
  };
  c.restart = supervision::restart_type::permanent;
  c.shutdown = supervision::shutdown_policy::after(std::chrono::seconds(5));
  c.snapshots = [committed, i](const std::string&) { return committed->for_shard(i); };
  c.validate = validate;
  if (placement)  // blocks for the node's answer: not on the supervisor's thread
    c = supervision::start_on_own_thread(std::move(c), placement->longest_start());
  return c;
}

supervision::child_spec worker_spec(const controller_state& j, const caf::actor& job,
                                    uint32_t i) {
  supervision::child_spec c;
  c.id = to_string(actor_id::worker(i));
  worker_config o;
  o.core.worker = i;
  o.core.epoch = j.run.core.epoch();
  o.core.parts = j.run.parts;
  for (uint32_t s = 0; s < j.cfg.training.shards; ++s)
    o.core.shard_names.push_back(to_string(actor_id::shard(s)));
  o.core.total_steps = j.cfg.training.steps;
  o.core.rule = j.cfg.training.rule.kind;
  o.core.windowed = j.cfg.checkpoints.every > 0;
  o.core.checkpoint_every = j.cfg.checkpoints.every;
  o.core.log_bound = replay_log_bound(j.cfg.checkpoints, j.cfg.training.workers);
  o.num_workers = j.cfg.training.workers;
  if (j.cfg.training.schedule.elastic()) {
    o.schedule = j.cfg.training.schedule;
    o.mean_of_step_workers = j.cfg.training.combine == gradient_combine::mean;
  }
  o.job = job;
  o.seed = j.cfg.training.seed;
  o.batch_size = j.cfg.training.batch_size;
  o.request_timeout = j.cfg.recovery.request_timeout;
  worker_env env;
  env.training_model = j.cfg.training_model;
  env.faults = j.faults->links();
  if (i < j.cfg.channels.size())
    env.channel = j.cfg.channels[i];
  c.start = [o, env, placement = j.cfg.placement, workers = j.workers_now,
             mean = j.cfg.training.combine == gradient_combine::mean](
               caf::actor_system& sys, const supervision::restart_context& ctx) mutable {
    o.directory = ctx.directory;
    if (auto now = workers->get(); now.elastic()) {  // changed at runtime, maybe
      o.schedule = now;
      o.mean_of_step_workers = mean;
    }
    if (placement)
      return placement->start_worker(sys, ctx.incarnation, o);
    return spawn_worker(sys, o, env);
  };
  c.restart = supervision::restart_type::transient;
  c.shutdown = supervision::shutdown_policy::after(std::chrono::seconds(5));
  if (j.cfg.placement)  // blocks for the node's answer: not on the supervisor's thread
    c = supervision::start_on_own_thread(std::move(c), j.cfg.placement->longest_start());
  return c;
}

supervision::supervisor_spec root_spec(controller_actor* self) {
  auto& j = self->state;
  auto& cfg = j.cfg;
  auto job = caf::actor_cast<caf::actor>(self);
  supervision::supervisor_spec shards;
  shards.name = to_string(actor_id::shards());
  shards.max_restarts = cfg.recovery.max_restarts;
  shards.period = cfg.recovery.restart_period;
  for (uint32_t i = 0; i < cfg.training.shards; ++i)
    shards.children.push_back(shard_spec(j, i));

  supervision::supervisor_spec workers;
  workers.name = to_string(actor_id::workers());
  workers.max_restarts = cfg.recovery.max_restarts;
  workers.period = cfg.recovery.restart_period;
  for (uint32_t i = 0; i < cfg.training.workers; ++i)
    if (!left_before(cfg.training.schedule, i, j.run.first_step))
      workers.children.push_back(worker_spec(j, job, i));

  supervision::child_spec ckpt;
  ckpt.id = to_string(actor_id::checkpointer());
  checkpointer_config co;
  co.dir = cfg.checkpoints.dir.string();
  co.keep_last = cfg.checkpoints.keep;
  co.num_shards = cfg.training.shards;
  co.job = job;
  co.incomplete_timeout = cfg.checkpoints.timeout;
  co.retry_min = cfg.checkpoints.retry_min;
  co.retry_max = cfg.checkpoints.retry_max;
  co.run_id = j.run.identity.run_id;
  co.config_hash = j.run.identity.config_hash;
  co.config = j.run.identity.config;
  checkpointer_env env;
  env.io = j.faults->disk();
  env.detached = !cfg.placement;  // see checkpointer_env::detached
  ckpt.start = [co, env](caf::actor_system& sys, const supervision::restart_context&) {
    return spawn_checkpointer(sys, co, env);
  };
  ckpt.shutdown = supervision::shutdown_policy::after(std::chrono::seconds(10));

  supervision::supervisor_spec root;
  root.name = to_string(actor_id::root());
  root.max_restarts = cfg.recovery.max_restarts;
  root.period = cfg.recovery.restart_period;
  root.random_seed = cfg.training.seed;
  root.children.push_back(std::move(ckpt));
  root.children.push_back(supervision::supervisor_child(std::move(shards)));
  root.children.push_back(supervision::supervisor_child(std::move(workers)));
  return root;
}

// The tree answered: it is up. The controller follows its events and the
// names of its children from here on.
void follow_tree(controller_actor* self) {
  auto& st = self->state;
  auto& tree = *st.run.tree;
  self->send(tree.events(), supervision::subscribe_atom::value);
  std::vector<actor_id> watched = {actor_id::checkpointer(), actor_id::shards(), actor_id::workers()};
  for (uint32_t i = 0; i < st.cfg.training.shards; ++i) watched.push_back(actor_id::shard(i));
  for (uint32_t i = 0; i < st.cfg.training.workers; ++i) watched.push_back(actor_id::worker(i));
  for (auto id : watched)
    self->send(tree.directory(), supervision::watch_atom::value, to_string(id));
  tree_up(self);
}

void send_window(controller_actor* self, const caf::actor& worker) {
  auto& coordinator = *self->state.progress.checkpoints;
  if (!coordinator.windowed())
    return;
  // Held at a change of workers under way until every actor has it (job_workers.cpp).
  auto& change = self->state.progress.change_at;
  self->send(worker, window_atom::value, change ? std::min(*change, coordinator.window()) : coordinator.window());
}

}  // namespace

void launch_tree(controller_actor* self) {
  auto& st = self->state;
  st.run.handles.clear();
  st.progress.done.clear();
  st.readout.final_checkpoint_since.reset();
  st.progress.checkpoints->clear_paused();  // the new tree's workers start unpaused
  st.progress.reports.clear();
  st.progress.worker_step.assign(st.cfg.training.workers, 0);
  if (auto& s = st.cfg.training.schedule; s.elastic())  // a worker that joins later has no step before it
    for (uint32_t w = 0; w < st.progress.worker_step.size() && w < s.slots(); ++w)
      st.progress.worker_step[w] = s.span(w).begin;
  // A worker that left before the tree's first step has nothing to run: it
  // is not started (a node for it may be what the job lacks), and is done.
  for (uint32_t w = 0; w < st.progress.worker_step.size(); ++w)
    if (left_before(st.cfg.training.schedule, w, st.run.first_step)) {
      st.progress.done.insert(w);
      st.progress.worker_step[w] = st.cfg.training.steps;
    }
  st.run.core.launched();
  st.run.tree.emplace(supervision::tree::launch(self->system(), root_spec(self)));
  st.run.root_down = false;
  auto root = st.run.tree->root();
  self->monitor(root);
  // The root answers once it has started every child. A child that cannot
  // start ends the root: its down message fails the job (on_root_down).
  self->request(root, std::chrono::seconds(10), supervision::which_children_atom::value)
    .then(
      [=](const std::vector<supervision::child_info>&) {
        auto& run = self->state.run;
        if (run.core.tree_answered(run.tree && run.tree->root() == root) == controller_action::follow_tree)
          follow_tree(self);
      },
      [=](caf::error& err) {
        auto& run = self->state.run;
        bool current =
          run.core.tree_answered(run.tree && run.tree->root() == root) == controller_action::follow_tree;
        if (current && err == caf::sec::request_timeout)
          end_job(self, make_error(errc::timeout, "the supervision tree did not start within 10 s"));
      });
}

void stop_tree_and_drain(controller_actor* self, std::function<void()> then) {
  auto& run = self->state.run;
  if (!run.tree) {
    then();
    return;
  }
  auto root = run.tree->root();
  auto events = run.tree->events();
  bool root_down = run.root_down;
  run.tree.reset();  // asks the root to stop its children, in reverse start order
  run.handles.clear();
  std::vector<caf::actor_addr> awaited;
  if (!root_down)
    awaited.push_back(root.address());
  after_downs(self, std::move(awaited), std::chrono::seconds(30), [=] {
    // The event stream stops once it has forwarded the root's last events.
    self->monitor(events);
    after_downs(self, {events.address()}, std::chrono::seconds(5), then);
  });
}

std::string progress_text(const controller_state& st) {
  auto& p = st.progress;
  std::string text = "workers at steps";
  for (size_t w = 0; w < p.worker_step.size(); ++w)
    text += (w ? ", " : " ") + std::to_string(p.worker_step[w]) +
            (p.done.count(static_cast<uint32_t>(w)) ? " (done)" : "");
  text += " of " + std::to_string(st.cfg.training.steps) + "; checkpoint window released to step " +
          std::to_string(p.checkpoints->released()) + "; epoch " + std::to_string(st.run.core.epoch());
  std::string missing;
  std::vector<actor_id> ids = {actor_id::checkpointer(), actor_id::shards(), actor_id::workers()};
  for (uint32_t i = 0; i < st.cfg.training.shards; ++i) ids.push_back(actor_id::shard(i));
  for (uint32_t i = 0; i < st.cfg.training.workers; ++i) ids.push_back(actor_id::worker(i));
  for (auto id : ids)
    if (!st.run.handles.count(id))
      missing += (missing.empty() ? "" : ", ") + to_string(id);
  if (!missing.empty())
    text += "; not up: " + missing;
  return text;
}

void say_worker_change(controller_actor* self, uint32_t w, uint64_t step, bool done) {
  auto& st = self->state;
  auto& workers = st.cfg.training.schedule;
  if (!workers.elastic() || w >= workers.slots())
    return;
  auto span = workers.span(w);
  auto& said = done ? st.progress.left_said : st.progress.joined_said;
  if (said.count(w) != 0)
    return;
  std::string detail;
  if (!done && span.begin > 0 && step > span.begin)
    detail = "joined at step " + std::to_string(span.begin) + ": " + std::to_string(workers.count(span.begin)) +
             " workers from then on";
  else if (done && span.end < st.cfg.training.steps)
    detail = "left after step " + std::to_string(span.end - 1) + ": " + std::to_string(workers.count(span.end)) +
             " workers from step " + std::to_string(span.end);
  if (detail.empty())
    return;
  said.insert(w);
  auto e = make_job_event(event_kind::membership, to_string(actor_id::worker(w)), std::move(detail));
  e.step = done ? span.end : span.begin;
  record(self, std::move(e));
}

void widen_window(controller_actor* self) {
  for (auto& [id, h] : self->state.run.handles)
    if (id.is(actor_kind::worker))
      send_window(self, h);
}

void watch_window(controller_actor* self) {
  auto& st = self->state;
  if (!st.run.tree || st.progress.worker_step.empty())
    return;
  auto lost = st.progress.checkpoints->watch(st.progress.slowest(), std::chrono::steady_clock::now());
  if (!lost)
    return;
  auto e = make_job_event(event_kind::checkpoint_failed, "checkpointer",
                          "the checkpoint at step " + std::to_string(*lost) +
                            " is lost: none of its snapshots reached the checkpointer within " +
                            std::to_string(st.cfg.checkpoints.timeout.count()) +
                            " ms while every worker waited for it");
  e.step = *lost;
  on_checkpoint_failed(self, std::move(e));  // given up: the window moves
}

void on_committed(controller_actor* self, const checkpoint_committed& c) {
  auto& st = self->state;
  auto& result = st.readout.result;
  ++result.checkpoints;
  result.checkpoint_write_seconds += static_cast<double>(c.write_us) / 1e6;
  result.checkpoint_write_cpu_seconds += static_cast<double>(c.write_cpu_us) / 1e6;
  bool moved = window_committed(self, c);
  if (st.cfg.placement)
    st.cfg.placement->committed(c.shards);
  if (moved)
    widen_window(self);
  for (auto& s : c.shards)
    for (uint32_t w = 0; w < st.cfg.training.workers; ++w)
      if (auto it = st.run.handles.find(actor_id::worker(w)); it != st.run.handles.end())
        self->send(it->second, truncate_atom::value, s.shard, s.step);
  maybe_finish(self);  // the end of the run may wait for this checkpoint
}

void on_directory(controller_actor* self, const supervision::directory_update& u) {
  auto& run = self->state.run;
  // Updates from a rolled-back tree's directory may still arrive.
  if (!run.tree || self->current_sender() != run.tree->directory().address())
    return;
  auto id = parse_actor_id(u.name);  // the tree's names are actor ids (above)
  if (!id)
    return;
  if (u.state != supervision::name_state::up) {
    run.handles.erase(*id);
    return;
  }
  auto& h = run.handles[*id];
  bool fresh = h != u.handle;
  h = u.handle;
  // An incarnation whose start read the schedule before a change at runtime
  // learns it before its window (job_workers.cpp).
  if (fresh && self->state.workers_changed && (id->is(actor_kind::worker) || id->is(actor_kind::shard)))
    self->send(u.handle, workers_changed_atom::value, self->state.cfg.training.schedule);
  if (fresh && id->is(actor_kind::worker))
    send_window(self, u.handle);
}

}  // namespace keel
