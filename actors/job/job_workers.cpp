// Workers changed while the job runs (job::change_workers): a reserved
// worker joins, or a worker leaves, at the first step no worker may have
// started, the checkpoint window's edge (worker_schedule::changed). The
// controller
//   1. computes the new schedule from that step on and writes it to the
//      checkpoint directory (worker_changes_file, durable before any step
//      it decides runs: a resume reads it back, job.cpp);
//   2. holds the window at that step (send_window, job_tree.cpp) and tells
//      every shard and worker the new schedule, waiting for each (one that
//      is down restarts with it: the specs read workers_now);
//   3. lets the window move. A joining worker's incarnation held in reserve
//      ends itself when told (worker.cpp); its next one starts at its join,
//      from the shards' seqs. An incarnation that comes up after the change
//      began is told it as it comes (on_directory, job_tree.cpp).
// A run with the same changes planned from the start (--worker-changes) is
// the same run, bit for bit.
#include <fcntl.h>

#include "actors/core/atoms.hpp"
#include "actors/job/job_controller.hpp"
#include "messages/errors.hpp"
#include "storage/file_io.hpp"

namespace keel {

namespace {

// Each shard and worker has this long to take a change (one that does not
// answer is down or restarting, and its next incarnation reads the new
// schedule).
constexpr auto change_timeout = std::chrono::seconds(10);

void changed(controller_actor* self, const worker_schedule& before, uint64_t at, caf::response_promise rp) {
  auto& st = self->state;
  auto& now = st.cfg.training.schedule;
  for (uint32_t w = 0; w < now.slots(); ++w) {
    auto name = to_string(actor_id::worker(w));
    if (before.reserved(w) && !now.reserved(w)) {
      st.progress.done.erase(w);
      st.progress.joined_said.insert(w);
      if (w < st.progress.worker_step.size())
        st.progress.worker_step[w] = at;
      auto e = make_job_event(event_kind::membership, name,
                              "joins at step " + std::to_string(at) + " (changed at runtime): " +
                                std::to_string(now.count(at)) + " workers from then on");
      e.step = at;
      record(self, std::move(e));
    } else if (before.span(w).end != now.span(w).end) {
      st.progress.left_said.insert(w);
      auto e = make_job_event(event_kind::membership, name,
                              "leaves after step " + std::to_string(at - 1) + " (changed at runtime): " +
                                std::to_string(now.count(at)) + " workers from step " + std::to_string(at));
      e.step = at;
      record(self, std::move(e));
    }
  }
  st.progress.change_at.reset();
  widen_window(self);
  rp.deliver(at);
  follow_up(self);
}

}  // namespace

caf::error write_worker_changes(const std::filesystem::path& dir, const worker_schedule& workers) {
  auto io = posix_io();
  auto tmp = dir / (std::string(worker_changes_file) + ".tmp");
  auto text = workers.to_string() + "\n";
  io->remove(tmp);  // left by a crashed run; create() never writes through an existing name
  auto f = io->create(tmp);
  if (!f)
    return f.error();
  if (auto err = (*f)->write_at(0, text.data(), text.size()))
    return err;
  if (auto err = (*f)->sync())
    return err;
  f->reset();
  if (auto err = io->rename(tmp, dir / worker_changes_file))
    return err;
  return io->sync_dir(dir);
}

caf::expected<std::optional<worker_schedule>> read_worker_changes(const std::filesystem::path& dir, uint32_t slots,
                                                                  uint64_t steps) {
  auto path = dir / worker_changes_file;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return std::optional<worker_schedule>();
  auto f = posix_io()->open(path);
  if (!f)
    return f.error();
  auto size = (*f)->size();
  if (!size)
    return size.error();
  if (*size > (uint64_t{1} << 20))
    return make_error(errc::invalid_field, path.string() + ": " + std::to_string(*size) + " bytes, not a worker schedule");
  std::string text(*size, '\0');
  if (auto err = (*f)->read_at(0, text.data(), text.size()))
    return err;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  auto s = text.empty() ? caf::expected<worker_schedule>(worker_schedule(slots))
                        : worker_schedule::parse(text, slots, steps);
  if (!s)
    return make_error(errc::invalid_field, path.string() + ": " + describe(s.error()));
  return std::optional<worker_schedule>(std::move(*s));
}

void change_workers_request(controller_actor* self, const std::string& items, caf::response_promise rp) {
  if (!admitted(self, rp, [=] { change_workers_request(self, items, rp); }))
    return;
  auto& st = self->state;
  auto bad = [&](const std::string& why) { rp.deliver(make_error(errc::invalid_argument, "change_workers: " + why)); };
  auto& window = *st.progress.checkpoints;
  if (!window.windowed())
    return bad("workers change at the checkpoint window's edge, and this job takes no checkpoints "
               "(checkpoint_config::every)");
  if (st.cfg.application_loop)
    return bad("an application's own loops (application_loop) run every worker's steps");
  if (st.progress.change_at)
    return bad("a change from step " + std::to_string(*st.progress.change_at) + " is under way");
  const uint64_t at = window.window();
  if (at >= st.cfg.training.steps)
    return bad("the run's last step " + std::to_string(st.cfg.training.steps - 1) +
               " comes before step " + std::to_string(at) + ", the first a change can take");
  auto next = st.cfg.training.schedule.changed(items, at, st.cfg.training.steps);
  if (!next)
    return rp.deliver(next.error());
  if (auto err = write_worker_changes(st.cfg.checkpoints.dir, *next))
    return rp.deliver(make_error(errc::io_error, "change_workers: cannot record the change in " +
                                                   st.cfg.checkpoints.dir.string() + ": " + describe(err)));
  auto before = st.cfg.training.schedule;
  st.cfg.training.schedule = *next;
  st.workers_now->set(*next);
  st.workers_changed = true;
  st.progress.change_at = at;
  std::vector<caf::actor> told;
  for (auto& [id, h] : st.run.handles)
    if (id.is(actor_kind::shard) || id.is(actor_kind::worker))
      told.push_back(h);
  auto left = std::make_shared<size_t>(told.size());
  if (told.empty())
    return changed(self, before, at, rp);
  for (auto& h : told)
    self->request(h, change_timeout, workers_changed_atom::value, *next)
      .then([=](caf::ok_atom) mutable { if (--*left == 0) changed(self, before, at, rp); },
            [=](caf::error&) mutable { if (--*left == 0) changed(self, before, at, rp); });
}

// Workers no node can run (training_config::min_workers): the placement,
// having waited --node-wait-ms for a node, a free worker slot or a client
// for worker W, asks whether W may leave. It leaves at a step every shard
// and worker can go back to, the newest checkpoint's: the job rolls back
// there (as after any loss it cannot mend in place) and the tree it starts
// again holds the schedule with W's leave at that step, recorded as a
// change at runtime (a resume keeps it). W's acknowledged pushes before
// the checkpoint stay; those after it are undone with the rollback, as
// every worker's are, and W does not make them again. The run is the one
// with that leave planned, bit for bit.
void lost_worker_request(controller_actor* self, uint32_t w, caf::response_promise rp) {
  auto& st = self->state;
  auto& cfg = st.cfg;
  const auto name = to_string(actor_id::worker(w));
  if (w >= cfg.training.workers)
    return rp.deliver(make_error(errc::invalid_argument, "'" + name + "' names no worker of the job"));
  auto refuse = [&](const std::string& why) {
    rp.deliver(make_error(errc::invalid_argument, name + " cannot leave instead: " + why));
  };
  if (st.run.core.worker_lost() == controller_action::refuse)
    return rp.deliver(not_running());
  const uint32_t min = cfg.training.min_workers;
  if (min == 0 || min >= cfg.training.workers)
    return refuse("the job's " + std::to_string(cfg.training.workers) +
                  " workers are fixed (keel cluster --workers MIN:MAX lets it go on with fewer)");
  if (st.run.leaving.count(w))
    return rp.deliver(uint64_t{0});
  auto& s = cfg.training.schedule;
  if (s.elastic() && s.reserved(w))
    return refuse("it is held in reserve");
  if (st.progress.checkpoints->last_good_step() == 0)
    return refuse("no checkpoint has committed yet, and a worker leaves at the newest checkpoint's step");
  uint32_t staying = 0;
  for (uint32_t v = 0; v < cfg.training.workers; ++v)
    staying += v != w && !st.run.leaving.count(v) &&
               (!s.elastic() || (!s.reserved(v) && s.span(v).end >= cfg.training.steps));
  if (staying < min)
    return refuse("the job would go on with " + std::to_string(staying) + " workers, fewer than its minimum " +
                  std::to_string(min) + " (--workers " + std::to_string(min) + ":" +
                  std::to_string(cfg.training.workers) + ")");
  st.run.leaving.insert(w);
  rp.deliver(uint64_t{0});
  if (st.run.core.phase() == run_phase::rolling_back)
    return;  // the rollback under way takes it
  roll_back(self, name + " leaves: no node could run it; the job goes on with " + std::to_string(staying) +
                    " workers (at least " + std::to_string(min) + ") from its newest checkpoint");
}

caf::error apply_leaving(controller_actor* self, uint64_t step) {
  auto& st = self->state;
  auto& cfg = st.cfg;
  auto s = cfg.training.schedule.elastic() ? cfg.training.schedule : worker_schedule(cfg.training.workers);
  std::vector<uint32_t> leaving;  // those that have not left by `step` already
  for (auto w : st.run.leaving)
    if (s.span(w).end > step)
      leaving.push_back(w);
  st.run.leaving.clear();
  if (leaving.empty())
    return {};
  std::string items, plan;
  for (auto w : leaving) {
    items += (items.empty() ? "" : ",") + to_string(actor_id::worker(w));
    plan += (plan.empty() ? "" : ",") + std::string("leave:") + to_string(actor_id::worker(w));
  }
  if (step == 0)
    return make_error(errc::invalid_argument, items + ": no node could run it, and no checkpoint validates to "
                                                      "leave at (the rollback restarts from step 0)");
  auto next = s.changed(plan, step, cfg.training.steps);
  if (!next)
    return next.error();
  if (auto err = write_worker_changes(cfg.checkpoints.dir, *next))
    return make_error(errc::io_error, "cannot record that " + items + " left in " + cfg.checkpoints.dir.string() +
                                        ": " + describe(err));
  cfg.training.schedule = *next;
  st.workers_now->set(*next);
  st.workers_changed = true;
  for (auto w : leaving) {
    st.progress.left_said.insert(w);
    auto e = make_job_event(event_kind::membership, to_string(actor_id::worker(w)),
                            "leaves after step " + std::to_string(step - 1) +
                              " (no node could run it): " + std::to_string(next->count(step)) +
                              " workers from step " + std::to_string(step) + ", at least " +
                              std::to_string(cfg.training.min_workers));
    e.step = step;
    record(self, std::move(e));
  }
  return {};
}

}  // namespace keel
