// The job controller: starts the tree, then follows the run from a blocking
// actor of its own (the `job` handle every keel actor reports to) until all
// workers are done. It folds supervision events into the job's timeline,
// forwards the shards' snapshots to the checkpointer, hands committed
// checkpoints to the shard supervisor and the workers, fires the fault
// plan (job_faults.cpp), and rolls the tree back to the last valid checkpoint when local
// recovery is impossible.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "actors/checkpointer.hpp"
#include "actors/job_impl.hpp"
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

job_event from_supervision(const supervision::event& e, int64_t at_ms) {
  auto j = make_job_event(folded(e.kind), e.child, supervision::to_string(e));
  j.at_ms = at_ms;
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
  e.at_ms = elapsed_ms();
  e.at_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                  started)
              .count();
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
      [&](supervision::event& e) { record(from_supervision(e, elapsed_ms())); },
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
          std::to_string(released_step) + "; epoch " + std::to_string(epoch);
  std::string missing;
  std::vector<std::string> names = {"checkpointer", "shards", "workers"};
  for (uint32_t i = 0; i < cfg.shards; ++i) names.push_back("shard:" + std::to_string(i));
  for (uint32_t i = 0; i < cfg.workers; ++i) names.push_back("worker:" + std::to_string(i));
  for (auto& name : names)
    if (!handles.count(name))
      missing += (missing.empty() ? "" : ", ") + name;
  if (!missing.empty())
    text += "; not up: " + missing;
  return text;
}

void job::impl::send_window(const caf::actor& worker) {
  if (cfg.checkpoint_every > 0)
    (*ctl)->send(worker, window_atom::value, released_step + 2 * cfg.checkpoint_every);
}

void job::impl::release(uint64_t step) {
  if (step <= released_step)
    return;
  released_step = step;
  for (auto& [name, h] : handles)
    if (name.rfind("worker:", 0) == 0)
      send_window(h);
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
  // an earlier run would put that run's state into this one.
  {
    auto store = snapshot_store::open(cfg.checkpoint_dir, {cfg.keep_checkpoints});
    if (!store)
      return store.error();
    auto ids = (*store)->committed();
    if (!ids)
      return ids.error();
    if (!ids->empty())
      return make_error(errc::invalid_argument,
                        "checkpoint directory " + cfg.checkpoint_dir.string() + " holds checkpoints " +
                          std::to_string(ids->front()) + ".." + std::to_string(ids->back()) +
                          " of an earlier run; keel does not resume a run from them: give an "
                          "empty directory, or remove them");
  }
  auto p = std::make_unique<impl>();
  p->cfg = std::move(cfg);
  auto& c = p->cfg;
  p->sys_cfg = std::make_unique<caf::actor_system_config>();
  register_message_types(*p->sys_cfg);
  p->sys_cfg->set("scheduler.max-threads", static_cast<int>(c.scheduler_threads));
  p->sys = std::make_unique<caf::actor_system>(*p->sys_cfg);
  p->ctl = std::make_unique<caf::scoped_actor>(*p->sys);
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
  p->committed = std::make_shared<committed_snapshots>(2);
  p->plan = c.faults;
  if (auto err = check_fault_plan(p->plan, c.shards, c.workers))
    return err;
  p->fired.assign(p->plan.size(), false);
  p->counted.assign(p->plan.size(), false);
  p->links = std::make_shared<link_faults>();
  // Faults that fire after N messages of a kind: the link that counts the
  // Nth tells the job's own actor, whose wait loop injects them.
  for (size_t i = 0; i < p->plan.size(); ++i)
    if (p->plan[i].when == trigger::messages)
      p->links->at_count(p->plan[i].of, p->plan[i].at_step,
                         [ctl = caf::actor_cast<caf::actor>(*p->ctl), i] {
                           caf::anon_send(ctl, fire_atom::value, static_cast<uint64_t>(i));
                         });
  p->disk = faulty_io::wrap();
  if (auto err = p->start_tree())
    return err;
  return std::unique_ptr<job>(new job(std::move(p)));
}

namespace {

// Restarts the whole tree from the newest checkpoint that validates.
caf::error roll_back(job::impl& j, const std::string& why) {
  j.record(make_job_event(event_kind::rollback, "root", why));
  ++j.result.rollbacks;
  // The job supervises the tree as root supervises its children: more
  // rollbacks within the period than the intensity allows end the job.
  auto now = std::chrono::steady_clock::now();
  j.rollback_times.push_back(now);
  while (now - j.rollback_times.front() > j.cfg.restart_period)
    j.rollback_times.pop_front();
  if (j.rollback_times.size() > static_cast<size_t>(std::max(j.cfg.max_restarts, 0))) {
    auto err = make_error(errc::escalated,
                          "root: " + std::to_string(j.rollback_times.size()) + " rollbacks within " +
                            std::to_string(j.cfg.restart_period.count()) +
                            " ms exceed the restart intensity (" + std::to_string(j.cfg.max_restarts) +
                            "); the last: " + why);
    j.record(make_job_event(event_kind::escalate, "root", describe(err)));
    return err;
  }
  if (j.tree) {
    j.tree->shutdown(std::chrono::seconds(30));
    j.tree.reset();
  }
  // A killed root's children die asynchronously: wait until the old
  // checkpointer is gone, so that no write of the old run races with the
  // store's cleanup and the rollback's own reading and discarding.
  if (auto it = j.handles.find("checkpointer"); it != j.handles.end()) {
    auto old = it->second;
    auto& self = *j.ctl;
    self->monitor(old);
    bool gone = false;
    while (!gone)
      self->receive([&](caf::down_msg& dm) { gone = dm.source == old.address(); },
                    caf::after(std::chrono::seconds(30)) >> [&] { gone = true; });
  }
  j.start_from.clear();
  j.committed->clear();
  j.not_back.clear();  // the whole tree starts afresh
  auto store = snapshot_store::open(j.cfg.checkpoint_dir, {j.cfg.keep_checkpoints});
  if (!store)
    return store.error();
  auto latest = (*store)->latest_valid();
  // What is newer than the checkpoint restored failed validation, and the
  // rolled-back run will write those ids again.
  auto keep = latest ? latest->checkpoint.manifest.checkpoint : 0;
  auto discarded = (*store)->discard_after(keep);
  if (!discarded)
    return discarded.error();
  for (auto id : *discarded) {
    auto e = make_job_event(event_kind::discarded, "checkpoint:" + std::to_string(id),
                      "newer than the checkpoint rolled back to");
    e.checkpoint = id;
    j.record(std::move(e));
  }
  if (latest) {
    for (auto& d : latest->skipped)
      j.record(make_job_event(event_kind::damaged, d.file, describe(d.reason)));
    for (auto& s : latest->checkpoint.snapshots)
      j.start_from.push_back(s.source());
    j.released_step = j.forwarded_step = latest->checkpoint.manifest.step;
    auto e = make_job_event(event_kind::restored, "root",
                      "rolling back to checkpoint " +
                        std::to_string(latest->checkpoint.manifest.checkpoint) + " at step " +
                        std::to_string(latest->checkpoint.manifest.step));
    e.checkpoint = latest->checkpoint.manifest.checkpoint;
    e.step = latest->checkpoint.manifest.step;
    j.record(std::move(e));
  } else {
    j.released_step = j.forwarded_step = 0;
    j.record(make_job_event(event_kind::restored, "root", "no valid checkpoint: restarting from step 0"));
  }
  ++j.epoch;
  return j.start_tree();
}

void report_progress(job::impl& j, uint64_t step) {
  uint64_t restarts = 0;
  for (auto& [name, n] : j.result.restarts)
    restarts += n;
  double secs = std::max(static_cast<double>(j.elapsed_ms()) / 1000.0, 1e-3);
  auto spe = std::max<uint64_t>(
    1, steps_per_epoch(j.cfg.training_model->num_train_examples(), j.cfg.workers, j.cfg.batch_size));
  auto e = make_job_event(event_kind::progress, "job", {});
  e.step = step;
  e.loss = j.loss_count ? j.loss_sum / static_cast<double>(j.loss_count) : NAN;
  e.samples_per_second = static_cast<double>(step * j.cfg.workers * j.cfg.batch_size) / secs;
  char line[256];
  std::snprintf(line, sizeof(line), "epoch %llu step %llu/%llu loss %.4f samples/s %.0f restarts %llu",
                static_cast<unsigned long long>(step / spe), static_cast<unsigned long long>(step),
                static_cast<unsigned long long>(j.cfg.steps), e.loss, e.samples_per_second,
                static_cast<unsigned long long>(restarts));
  e.detail = line;
  if (j.cfg.progress_accuracy) {
    // The parameters the shards hold now (every shard's, read as a
    // snapshot), scored on the held-out set.
    auto read = j.read_parameters(false);
    auto scratch = j.cfg.training_model->make_scratch();
    auto q = read ? j.cfg.training_model->evaluate({j.result.dense, j.result.sparse}, *scratch)
                  : caf::expected<evaluation>(read.error());
    if (q && q->accuracy) {
      e.accuracy = *q->accuracy;
      std::snprintf(line, sizeof(line), " accuracy %.4f", *q->accuracy);
    } else if (q) {
      std::snprintf(line, sizeof(line), " test log loss %.4f", q->log_loss);
    } else {
      std::snprintf(line, sizeof(line), " (no evaluation: %s)", describe(q.error()).c_str());
    }
    e.detail += line;
  }
  j.loss_sum = 0;
  j.loss_count = 0;
  j.record(std::move(e));
}

// Every worker waits at the checkpoint window, and no checkpoint has moved
// it for checkpoint_timeout: the snapshots of the checkpoint it waits for
// were lost before the checkpointer saw any of them. That checkpoint is
// lost; the one in force stays, and the window moves on.
void watch_window(job::impl& j) {
  auto n = j.cfg.checkpoint_every;
  auto slowest = *std::min_element(j.worker_step.begin(), j.worker_step.end());
  if (n == 0 || !j.tree || slowest < j.released_step + 2 * n) {
    j.stalled_since.reset();
    return;
  }
  auto now = std::chrono::steady_clock::now();
  if (!j.stalled_since) {
    j.stalled_since = now;
    return;
  }
  if (now - *j.stalled_since < j.cfg.checkpoint_timeout)
    return;
  auto lost = j.released_step + n;
  auto e = make_job_event(event_kind::checkpoint_failed, "checkpointer",
                    "the checkpoint at step " + std::to_string(lost) +
                      " is lost: none of its snapshots reached the checkpointer within " +
                      std::to_string(j.cfg.checkpoint_timeout.count()) +
                      " ms while every worker waited for it");
  e.step = lost;
  j.record(std::move(e));
  j.stalled_since.reset();
  j.release(lost);
}


}  // namespace

caf::expected<job_result> job::wait(std::chrono::milliseconds timeout) {
  auto& j = *impl_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto& self = *j.ctl;
  caf::error failure;
  bool complete = false;
  // Runs until every worker of the current tree is done *and* every shard
  // holds every push. Faults may still strike after the workers' last step
  // (a shard restarts and needs their replay, the root dies and the job
  // rolls back), so the read-out happens inside this loop, retried between
  // messages until it finds the shards complete.
  while (!complete && !failure) {
    if (!j.tree)
      return make_error(errc::shutting_down, "the job was stopped");
    bool finished = j.done.size() == j.cfg.workers;
    if (finished) {
      auto read = j.read_parameters(true);
      if (!read) {
        failure = read.error();  // a shard's state failed validation
        break;
      }
      if (*read)
        break;
    }
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) {
      failure = make_error(errc::timeout, "job did not finish within " +
                                            std::to_string(timeout.count()) + " ms (" +
                                            j.progress_text() + ")");
      break;
    }
    self->receive(
      [&](job_event& e) {
        e.at_ms = j.elapsed_ms();  // one clock for the timeline: the job's
        if (e.kind == event_kind::checkpoint_failed)
          j.release(e.step);  // the previous checkpoint stays in force; go on
        j.record(std::move(e));
      },
      [&](supervision::event& e) {
        if (e.kind == supervision::event_kind::restart || e.kind == supervision::event_kind::start)
          j.not_back.erase(e.child);
        j.record(from_supervision(e, j.elapsed_ms()));
      },
      [&](supervision::directory_update& u) {
        // Updates from a rolled-back tree's directory may still arrive.
        if (!j.tree || self->current_sender() != j.tree->directory().address())
          return;
        if (u.state != supervision::name_state::up) {
          j.handles.erase(u.name);
          return;
        }
        auto& h = j.handles[u.name];
        bool fresh = h != u.handle;
        h = u.handle;
        if (fresh && u.name.rfind("worker:", 0) == 0)
          j.send_window(u.handle);
        // Snapshots in flight at a checkpointer that died are lost.
        if (fresh && u.name == "checkpointer")
          j.release(j.forwarded_step);
      },
      [&](shard_snapshot_msg& m) {
        auto d = decode(m);
        uint64_t step = d ? d->root().getStep() : 0;
        j.forwarded_step = std::max(j.forwarded_step, step);
        if (auto it = j.handles.find("checkpointer"); it != j.handles.end())
          self->send(it->second, std::move(m));
        else
          j.release(step);  // no checkpointer to take it: this checkpoint is lost
      },
      [&](checkpoint_committed& c) {
        j.release(c.step);
        ++j.result.checkpoints;
        j.committed->add(c.checkpoint, c.snapshots);
        // Workers may drop what the checkpoint covers of each shard: seqs up
        // to that shard's snapshot step (under SSP and ASP the shards of one
        // checkpoint may stand at different steps).
        for (auto& frame : c.snapshots) {
          auto d = decode<schema::ShardSnapshot>(frame);
          if (!d)
            continue;
          auto shard = d->root().getShard();
          auto covered = d->root().getStep();
          for (uint32_t w = 0; w < j.cfg.workers; ++w)
            if (auto it = j.handles.find("worker:" + std::to_string(w)); it != j.handles.end())
              self->send(it->second, truncate_atom::value, shard, covered);
        }
      },
      [&](step_atom, uint32_t epoch, uint32_t worker, uint64_t step, double loss) {
        if (epoch != j.epoch || worker >= j.worker_step.size())
          return;
        j.worker_step[worker] = step;
        j.loss_sum += loss;
        ++j.loss_count;
        auto slowest = *std::min_element(j.worker_step.begin(), j.worker_step.end());
        if (j.cfg.progress_every > 0 && slowest >= j.last_progress + j.cfg.progress_every) {
          j.last_progress = slowest;
          report_progress(j, slowest);
        }
      },
      [&](fire_atom, uint64_t i) {
        if (i < j.plan.size())
          j.counted[i] = true;  // fire_due_faults injects it
      },
      [&](done_atom, worker_report& r) {
        if (r.epoch != j.epoch)
          return;
        j.done.insert(r.worker);
        j.reports[r.worker] = r;  // a worker killed after its last step reports again
      },
      [&](rollback_atom, uint32_t epoch, uint32_t, std::string& why) {
        if (epoch == j.epoch)
          failure = roll_back(j, why);
      },
      [&](caf::down_msg& dm) {
        if (!j.tree || dm.source != j.tree->root().address())
          return;
        if (is(dm.reason, errc::escalated)) {
          j.record(make_job_event(event_kind::escalate, "root", describe(dm.reason)));
          failure = dm.reason;
        } else {
          failure = roll_back(j, "the root supervisor went down: " + j.sys->render(dm.reason));
        }
      },
      caf::after(until_next_timed(
        j, finished ? std::chrono::milliseconds(20)
                    : std::chrono::duration_cast<std::chrono::milliseconds>(left))) >> [] {});
    fire_due_faults(j, *this);
    watch_window(j);
  }
  if (failure)
    return failure;
  return j.finish();
}

}  // namespace keel
