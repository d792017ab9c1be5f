// The job controller: starts the tree, then follows the run from a blocking
// actor of its own (the `job` handle every keel actor reports to) until all
// workers are done. It folds supervision events into the job's timeline and
// hands what happens to its parts: checkpoints to the checkpoint coordinator
// (window, commit fan-out), whole-tree recovery to the rollback policy
// (job_recovery.cpp), and the fault plan to the fault driver (job_faults.cpp
// holds the hooks it calls).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "actors/job/job_impl.hpp"
#include "actors/job/placement.hpp"
#include "actors/ps/checkpointer.hpp"
#include "messages/decode.hpp"
#include "messages/register_types.hpp"
#include "storage/snapshot_store.hpp"

namespace keel {

namespace {

caf::error check(const job_config& c) {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, std::move(what)); };
  if (!c.training_model)
    return bad("job: no model");
  if (c.shards == 0 || c.workers == 0)
    return bad("job: --shards and --workers must be at least 1");
  if (c.batch_size == 0)
    return bad("job: batch size must be at least 1");
  if (c.checkpoint_dir.empty())
    return bad("job: no checkpoint directory");
  if (c.keep_checkpoints == 0)
    return bad("job: keep at least one checkpoint");
  auto dense = c.training_model->layout().dense_size();
  if (c.shards > dense + c.training_model->layout().sparse_key_count())
    return bad("job: " + std::to_string(c.shards) + " shards for only " + std::to_string(dense) +
               " parameters");
  // The fault plan: every target exists, every fault can fire.
  if (auto err = check_fault_plan(c.faults, c.shards, c.workers, c.placement ? c.placement->nodes() : 0))
    return err;
  for (auto& f : c.faults) {
    if (f.when == trigger::step && f.at_step > c.steps)
      return bad("fault '" + to_string(f) + "': step " + std::to_string(f.at_step) +
                 " is past the run's last step " + std::to_string(c.steps) + " (it would never fire)");
    if (f.is_node_fault() && !c.node_faults)
      return bad("fault '" + to_string(f) + "': nothing carries out node faults here "
                 "(job_config::node_faults; keel cluster does for the nodes it starts)");
  }
  return {};
}

event_kind folded(supervision::event_kind k) {
  switch (k) {
    case supervision::event_kind::start: return event_kind::start;
    case supervision::event_kind::down: return event_kind::down;
    case supervision::event_kind::restart: return event_kind::restart;
    case supervision::event_kind::escalate: return event_kind::escalate;
    case supervision::event_kind::shutdown: return event_kind::shutdown;
  }
  return event_kind::down;
}

job_event from_supervision(const supervision::event& e) {
  auto j = make_job_event(folded(e.kind), e.child, supervision::to_string(e));
  j.count = e.incarnation;
  if (e.from_snapshot)
    j.snapshot = e.snapshot_label;
  j.failed = e.kind == supervision::event_kind::down && static_cast<bool>(e.reason);
  return j;
}



}  // namespace

int64_t job::impl::elapsed_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               started)
    .count();
}

void job::impl::record(job_event e) {
  record_at(std::move(e), std::chrono::steady_clock::now());
}

void job::impl::record_at(job_event e, std::chrono::steady_clock::time_point at) {
  e.at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - started).count();
  e.at_us = std::chrono::duration_cast<std::chrono::microseconds>(at - started).count();
  if (e.kind == event_kind::restart)
    ++result.restarts[e.actor];
  if (on_event)
    on_event(e);
  result.events.push_back(std::move(e));
}

void job::impl::stop_tree_and_drain() {
  if (!tree)
    return;
  auto events = tree->events();
  tree->shutdown(std::chrono::seconds(30));
  tree.reset();
  auto& self = *ctl;
  self->monitor(events);
  bool drained = false;
  while (!drained) {
    self->receive(
      [&](job_event& e) { record(std::move(e)); },
      [&](supervision::event& e) { record(from_supervision(e)); },
      [&](caf::down_msg& dm) { drained = dm.source == events.address(); },
      [&](caf::message&) {},  // late snapshots, steps, directory updates
      caf::after(std::chrono::seconds(5)) >> [&] { drained = true; });
  }
}

// Where the run stands, for an error that says why it is stuck.
std::string job::impl::progress_text() const {
  std::string text = "workers at steps";
  for (size_t w = 0; w < worker_step.size(); ++w)
    text += (w ? ", " : " ") + std::to_string(worker_step[w]) + (done.count(static_cast<uint32_t>(w)) ? " (done)" : "");
  text += " of " + std::to_string(cfg.steps) + "; checkpoint window released to step " +
          std::to_string(checkpoints->released()) + "; epoch " + std::to_string(epoch);
  std::string missing;
  std::vector<actor_id> ids = {actor_id::checkpointer(), actor_id::shards(), actor_id::workers()};
  for (uint32_t i = 0; i < cfg.shards; ++i) ids.push_back(actor_id::shard(i));
  for (uint32_t i = 0; i < cfg.workers; ++i) ids.push_back(actor_id::worker(i));
  for (auto id : ids)
    if (!handles.count(id))
      missing += (missing.empty() ? "" : ", ") + to_string(id);
  if (!missing.empty())
    text += "; not up: " + missing;
  return text;
}

void job::impl::send_window(const caf::actor& worker) {
  if (checkpoints->windowed())
    (*ctl)->send(worker, window_atom::value, checkpoints->window());
}

void job::impl::widen_window() {
  for (auto& [id, h] : handles)
    if (id.is(actor_kind::worker))
      send_window(h);
}

job::impl::~impl() {
  // The placement's actors live in this system, which waits for them.
  if (cfg.placement)
    cfg.placement->detach();
  // The members go in reverse order of declaration: every actor handle
  // before `sys`, which waits for its detached actors (the checkpointer).
}

job::job(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

job::~job() {
  if (impl_ && impl_->tree)
    impl_->tree->shutdown(std::chrono::seconds(30));
}

caf::expected<job::parameters_now> job::parameters() {
  auto& j = *impl_;
  if (!j.tree)
    return make_error(errc::shutting_down, "the job is not running");
  auto read = j.read_parameters(false);
  if (!read)
    return read.error();
  return parameters_now{j.result.dense, j.result.sparse};
}

caf::error job::stop() {
  auto& j = *impl_;
  if (!j.tree)
    return make_error(errc::shutting_down, "the job is not running");
  j.stop_tree_and_drain();
  return {};
}

void job::on_event(std::function<void(const job_event&)> f) {
  impl_->on_event = std::move(f);
}

caf::expected<std::unique_ptr<job>> job::start(job_config cfg) {
  if (auto err = check(cfg))
    return err;
  std::error_code ec;
  std::filesystem::create_directories(cfg.checkpoint_dir, ec);
  if (ec)
    return make_error(errc::io_error, "checkpoint directory " + cfg.checkpoint_dir.string() + ": " +
                                        ec.message());
  // A rollback reads the newest valid checkpoint in the directory: one of
  // an earlier run would put that run's state into this one, unless this
  // run is that run, resumed.
  {
    auto store = snapshot_store::open(cfg.checkpoint_dir, {cfg.keep_checkpoints});
    if (!store)
      return store.error();
    auto ids = (*store)->committed();
    if (!ids)
      return ids.error();
    if (!ids->empty() && !cfg.resume)
      return make_error(errc::invalid_argument,
                        "checkpoint directory " + cfg.checkpoint_dir.string() + " holds checkpoints " +
                          std::to_string(ids->front()) + ".." + std::to_string(ids->back()) +
                          " of an earlier run: resume that run (keel train --resume DIR, "
                          "job_config::resume), or give an empty directory");
    if (ids->empty() && cfg.resume)
      return make_error(errc::not_found, "nothing to resume: checkpoint directory " +
                                           cfg.checkpoint_dir.string() +
                                           " holds no committed checkpoint");
  }
  auto p = std::make_unique<impl>();
  p->cfg = std::move(cfg);
  auto& c = p->cfg;
  p->sys_cfg = std::make_unique<caf::actor_system_config>();
  register_message_types(*p->sys_cfg);
  if (c.placement)
    c.placement->configure(*p->sys_cfg);
  p->sys_cfg->set("scheduler.max-threads", static_cast<int>(c.scheduler_threads));
  // A scheduler thread that runs out of work polls its queue (and steals)
  // this many times before it starts sleeping 50 us between polls (CAF's
  // default: 100). A training step hands work between actors several times,
  // and each hand-off that found its thread in those sleeps waited for the
  // wake-up (on this VM, well over 50 us): keel train's MNIST defaults ran
  // 44-50k samples/s with CAF's default and 50-57k with this (medians of
  // 6-8 alternating runs). The polling lasts a few milliseconds, so an idle
  // job still sleeps: a run that waited at the checkpoint window for 1.2 s
  // used 84 ms of CPU against 74 ms. Only when the job's actors run here:
  // a cluster's coordinator shares its cores with node processes, whose
  // work its polling would take (keel cluster ran slower with it).
  if (!c.placement)
    p->sys_cfg->set("work-stealing.aggressive-poll-attempts", 100000);
  p->sys = std::make_unique<caf::actor_system>(*p->sys_cfg);
  p->ctl = std::make_unique<caf::scoped_actor>(*p->sys);
  if (c.placement)
    if (auto err = c.placement->attach(*p->sys, caf::actor_cast<caf::actor>(*p->ctl)))
      return err;
  auto& layout = c.training_model->layout();
  p->parts = partition_keys(layout.dense_size(), layout.sparse_key_count(), c.shards);
  for (uint32_t i = 0; i < c.shards; ++i) {
    shard_config sc;
    sc.shard = i;
    sc.num_workers = c.workers;
    sc.dense = p->parts[i].dense;
    sc.sparse = p->parts[i].sparse;
    sc.rule = c.rule;
    sc.optimizer = c.optimizer;
    p->shard_cfgs.push_back(sc);
  }
  p->checkpoints.emplace(c.checkpoint_every, c.checkpoint_timeout);
  p->rollbacks.emplace(c.max_restarts, c.restart_period);
  // A fault that fires after N messages of a kind: the link that counts the
  // Nth tells the job's own actor, whose wait loop injects it.
  p->faults.emplace(c.faults, c.checkpoint_dir, *p,
                    [ctl = caf::actor_cast<caf::actor>(*p->ctl)](size_t i) {
                      caf::anon_send(ctl, fire_atom::value, static_cast<uint64_t>(i));
                    });
  if (c.resume)
    if (auto err = p->resume_from_newest_checkpoint())
      return err;
  if (auto err = p->start_tree())
    return err;
  // Faults due at once (at 0 ms) strike now, while the run is young, not
  // whenever the caller first waits: by then a short run may be over.
  p->faults->fire_due(0, p->elapsed_ms());
  return std::unique_ptr<job>(new job(std::move(p)));
}

// Every worker waits at the checkpoint window, and no checkpoint has moved
// it for checkpoint_timeout: the snapshots of the checkpoint it waits for
// were lost before the checkpointer saw them all. That checkpoint is given
// up; the one in force stays, and the window moves on.
void job::impl::watch_window() {
  if (!tree || worker_step.empty())
    return;
  auto slowest = *std::min_element(worker_step.begin(), worker_step.end());
  auto lost = checkpoints->watch(slowest, std::chrono::steady_clock::now());
  if (!lost)
    return;
  auto e = make_job_event(event_kind::checkpoint_failed, "checkpointer",
                          "the checkpoint at step " + std::to_string(*lost) +
                            " is lost: none of its snapshots reached the checkpointer within " +
                            std::to_string(cfg.checkpoint_timeout.count()) +
                            " ms while every worker waited for it");
  e.step = *lost;
  record(std::move(e));
  if (checkpoints->given_up(*lost))
    widen_window();
}

// A commit's fan-out: the window moves, and each worker may drop what the
// checkpoint covers of each shard (seqs up to that shard's snapshot step).
void job::impl::on_committed(const checkpoint_committed& c) {
  ++result.checkpoints;
  result.checkpoint_write_seconds += static_cast<double>(c.write_us) / 1e6;
  result.checkpoint_write_cpu_seconds += static_cast<double>(c.write_cpu_us) / 1e6;
  if (checkpoints->committed(c.checkpoint, c.step, c.shards))
    widen_window();
  for (auto& s : c.shards)
    for (uint32_t w = 0; w < cfg.workers; ++w)
      if (auto it = handles.find(actor_id::worker(w)); it != handles.end())
        (*ctl)->send(it->second, truncate_atom::value, s.shard, s.step);
}

void job::impl::on_directory(const supervision::directory_update& u) {
  // Updates from a rolled-back tree's directory may still arrive.
  if (!tree || (*ctl)->current_sender() != tree->directory().address())
    return;
  auto id = parse_actor_id(u.name);  // the tree's names are actor ids (job_tree.cpp)
  if (!id)
    return;
  if (u.state != supervision::name_state::up) {
    handles.erase(*id);
    return;
  }
  auto& h = handles[*id];
  bool fresh = h != u.handle;
  h = u.handle;
  if (fresh && id->is(actor_kind::worker))
    send_window(u.handle);
}

// How long the wait loop may block: until the next timed fault or window
// deadline, `cap` at most.
std::chrono::milliseconds job::impl::until_next(std::chrono::milliseconds cap) const {
  if (auto due = checkpoints->next_deadline()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  *due - std::chrono::steady_clock::now()) +
                std::chrono::milliseconds(1);
    cap = std::min(cap, std::max(std::chrono::milliseconds(0), left));
  }
  return faults->until_next(cap, elapsed_ms());
}

caf::expected<job_result> job::wait(std::chrono::milliseconds timeout) {
  auto& j = *impl_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto& self = *j.ctl;
  caf::error failure;
  // Runs until every worker of the current tree is done *and* every shard
  // holds every push. Faults may still strike after the workers' last step
  // (a shard restarts and needs their replay, the root dies and the job
  // rolls back), so the read-out happens inside this loop, retried between
  // messages until it finds the shards complete.
  while (!failure) {
    if (!j.tree)
      return make_error(errc::shutting_down, "the job was stopped");
    bool finished = j.done.size() == j.cfg.workers;
    if (finished) {
      auto read = j.read_parameters(true);
      if (!read)
        return read.error();  // a shard's state failed validation
      if (*read)
        return j.finish();
    }
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero())
      return make_error(errc::timeout, "job did not finish within " +
                                         std::to_string(timeout.count()) + " ms (" +
                                         j.progress_text() + ")");
    self->receive(
      [&](job_event& e) {
        if (e.kind == event_kind::checkpoint_failed && j.checkpoints->given_up(e.step))
          j.widen_window();  // the previous checkpoint stays in force; go on
        j.record(std::move(e));
      },
      [&](supervision::event& e) {
        if (e.kind == supervision::event_kind::restart || e.kind == supervision::event_kind::start)
          j.faults->back(e.child);
        j.record(from_supervision(e));
      },
      [&](supervision::directory_update& u) { j.on_directory(u); },
      [&](checkpoint_committed& c) { j.on_committed(c); },
      [&](step_atom, uint32_t epoch, uint32_t worker, uint64_t step, uint64_t loss_bits) {
        if (epoch != j.epoch || worker >= j.worker_step.size())
          return;
        double loss = 0;
        std::memcpy(&loss, &loss_bits, sizeof loss);
        j.worker_step[worker] = step;
        j.loss_sum += loss;
        ++j.loss_count;
        auto slowest = *std::min_element(j.worker_step.begin(), j.worker_step.end());
        if (j.cfg.progress_every > 0 && slowest >= j.last_progress + j.cfg.progress_every) {
          // Progress points sit on the multiples of progress_every. The
          // slowest worker's step can move by more than one (a restarted
          // worker resumes where its shards need it); a point set at that
          // step shifted every later one, and the run's last was lost.
          j.last_progress = slowest - slowest % j.cfg.progress_every;
          j.report_progress(j.last_progress);
        }
      },
      [&](fire_atom, uint64_t i) { j.faults->count_reached(i); },
      [&](done_atom, worker_report& r) {
        if (r.epoch != j.epoch)
          return;
        j.done.insert(r.worker);
        j.reports[r.worker] = r;  // a worker killed after its last step reports again
        // A done worker has completed every step, though it may not have
        // reported the last ones: an incarnation that finds the shards
        // through its last step ends without a step report. Faults due at
        // those steps are due now.
        if (r.worker < j.worker_step.size())
          j.worker_step[r.worker] = j.cfg.steps;
      },
      [&](rollback_atom, uint32_t epoch, uint32_t, std::string& why) {
        if (epoch == j.epoch)
          failure = j.roll_back(why);
      },
      [&](caf::down_msg& dm) {
        if (!j.tree || dm.source != j.tree->root().address())
          return;
        if (is(dm.reason, errc::escalated)) {
          j.record(make_job_event(event_kind::escalate, "root", describe(dm.reason)));
          failure = dm.reason;
        } else {
          failure = j.roll_back("the root supervisor went down: " + j.sys->render(dm.reason));
        }
      },
      caf::after(j.until_next(finished ? std::chrono::milliseconds(20)
                                       : std::chrono::duration_cast<std::chrono::milliseconds>(left))) >>
        [] {});
    if (!j.worker_step.empty())
      j.faults->fire_due(*std::min_element(j.worker_step.begin(), j.worker_step.end()),
                         j.elapsed_ms());
    j.watch_window();
  }
  return failure;
}

}  // namespace keel
