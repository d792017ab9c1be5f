// The application's handle on a job: job::start validates the configuration
// and the checkpoint directory, makes the actor system, spawns the job
// controller (job_controller.hpp), which runs the job from then on, and
// waits only until its first tree is up. Every other call is a request to
// the controller from the caller's thread, or (wait) a wait on the event
// feed's outcome (event_feed.hpp), which also delivers on_event callbacks.
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <caf/all.hpp>

#include "actors/core/client_channel.hpp"
#include "actors/job/config_bounds.hpp"
#include "actors/job/event_feed.hpp"
#include "actors/job/job_controller.hpp"
#include "actors/job/job_identity.hpp"
#include "actors/job/placed_job.hpp"
#include "actors/job/placement.hpp"
#include "actors/job/ps_client.hpp"
#include "messages/errors.hpp"
#include "messages/register_types.hpp"
#include "storage/directory_lock.hpp"
#include "storage/snapshot_store.hpp"

namespace keel {

namespace {

caf::error check(const placed_job_config& c) {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, std::move(what)); };
  if (!c.training_model)
    return bad("job: no model");
  // First, before any value sizes anything (a channel per worker, below).
  if (auto problem = check_bounds(c))
    return bad("job: " + problem->field + ": " + problem->why);
  if (auto& s = c.training.schedule; s.elastic()) {
    if (s.slots() != c.training.workers)
      return bad("job: the worker schedule is for " + std::to_string(s.slots()) + " workers, the job has " +
                 std::to_string(c.training.workers));
    if (auto checked = worker_schedule::make(s.spans(), c.training.steps); !checked)
      return checked.error();
  }
  const float scale = c.training.optimizer.gradient_scale;
  if (!(std::isfinite(scale) && scale > 0))
    return bad("job: optimizer.gradient_scale " + std::to_string(scale) + " must be a positive number");
  if (c.checkpoints.dir.empty())
    return bad("job: no checkpoint directory");
  if (c.checkpoints.keep == 0)
    return bad("job: keep at least one checkpoint");
  if (c.checkpoints.retry_min.count() <= 0 || c.checkpoints.retry_max < c.checkpoints.retry_min)
    return bad("job: checkpoint retries need 0 < retry_min <= retry_max");
  auto dense = c.training_model->layout().dense_size();
  if (c.training.shards > dense + c.training_model->layout().sparse_key_count())
    return bad("job: " + std::to_string(c.training.shards) + " shards for only " + std::to_string(dense) +
               " parameters");
  auto& limits = c.training.tables;
  if ((limits.capacity_rows > 0 || limits.admit_after > 1) && c.training_model->layout().tables().empty())
    return bad("job: table limits (a capacity or an admission filter) for " + c.training_model->name() +
               ", a model without embedding tables");
  if (limits.eviction != eviction_policy::least_recently_updated && limits.capacity_rows == 0)
    return bad(std::string("job: table eviction ") + to_string(limits.eviction) +
               " without a capacity (nothing is evicted from unbounded tables)");
  if (limits.admit_after > max_admit_after)
    return bad("job: admission after " + std::to_string(limits.admit_after) + " pushes: at most " +
               std::to_string(max_admit_after));
  if (c.placement && c.application_loop && c.placement->application_loops() > 0 &&
      c.placement->application_loops() != c.training.workers)
    return bad("job: the placement waits for clients running the loops of " +
               std::to_string(c.placement->application_loops()) + " workers, and the job has " +
               std::to_string(c.training.workers));
  if (c.placement && c.application_loop != (c.placement->application_loops() > 0))
    return bad(c.application_loop
                 ? "job: an application's own loop (application_loop) in a cluster runs in client processes "
                   "(keel::cluster_client): the placement must start the workers there (cluster_placement_config::"
                   "client_workers)"
                 : "job: the placement starts the workers in client processes, but the job runs its model's own "
                   "loop (set job_config::application_loop)");
  if (c.training.min_workers > c.training.workers)
    return bad("job: at least " + std::to_string(c.training.min_workers) + " workers of " +
               std::to_string(c.training.workers) + ": the minimum must not pass the number of workers");
  if (c.training.min_workers > 0 && c.training.min_workers < c.training.workers && c.checkpoints.every == 0)
    return bad("job: a minimum of workers (--workers MIN:MAX) needs checkpoints: a worker that leaves does so "
               "at the newest checkpoint's step (--checkpoint-every)");
  if (c.training.min_workers > 0 && c.training.min_workers < c.training.workers && c.application_loop)
    return bad("job: a minimum of workers (--workers MIN:MAX) with an application's own loops: its loops run "
               "every worker's steps");
  if (c.application_loop && c.training.schedule.elastic())
    return bad("job: an application's own loop (application_loop) with an elastic worker schedule: "
               "its workers run every step");
  if (auto err = check_job_rules(c))
    return err;
  // The fault plan: every target exists, every fault can fire.
  if (auto err = check_fault_plan(c.faults.plan, c.training.shards, c.training.workers, c.placement ? c.placement->nodes() : 0))
    return err;
  for (auto& f : c.faults.plan) {
    if (f.when == trigger::step && f.at_step > c.training.steps)
      return bad("fault '" + to_string(f) + "': step " + std::to_string(f.at_step) +
                 " is past the run's last step " + std::to_string(c.training.steps) + " (it would never fire)");
    if (f.is_node_fault() && f.kind != fault_kind::drain && !c.faults.node_faults)
      return bad("fault '" + to_string(f) + "': nothing carries out node faults here "
                 "(fault_config::node_faults; keel cluster does for the nodes it starts)");
  }
  return {};
}

}  // namespace

uint64_t replay_log_bound(const checkpoint_config& cfg, uint32_t workers) {
  if (cfg.max_log_bytes > 0)
    return cfg.max_log_bytes;
  auto pages = ::sysconf(_SC_PHYS_PAGES);
  auto page = ::sysconf(_SC_PAGE_SIZE);
  uint64_t memory = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                                          : uint64_t{4} << 30;  // unknown: assume 4 GiB
  return std::max<uint64_t>(1, memory / 4 / std::max<uint32_t>(1, workers));
}

std::chrono::milliseconds stall_timeout_for(const job_config& cfg, std::chrono::milliseconds longest_placement_wait,
                                            bool loops_in_clients) {
  if (cfg.recovery.stall_timeout.count() > 0)
    return cfg.recovery.stall_timeout;
  if (cfg.application_loop && !loops_in_clients)
    return std::chrono::milliseconds{0};
  return longest_placement_wait + cfg.checkpoints.storage_deadline + 10 * cfg.recovery.request_timeout;
}

namespace {

// Makes the checkpoint directory if needed and takes its lock (one writer
// at a time), before anything reads or cleans the store: a second process
// opening the store would remove the first one's files in progress.
caf::expected<directory_lock> lock_directory(const job_config& cfg) {
  std::error_code ec;
  std::filesystem::create_directories(cfg.checkpoints.dir, ec);
  if (ec)
    return make_error(errc::io_error, "checkpoint directory " + cfg.checkpoints.dir.string() + ": " +
                                        ec.message());
  return directory_lock::acquire(cfg.checkpoints.dir);
}

// A rollback reads the newest valid checkpoint in the directory: one of an
// earlier run would put that run's state into this one, unless this run is
// that run, resumed. Returns the run's identity (job_identity.hpp).
caf::expected<run_identity> check_directory(const job_config& cfg) {
  store_options opts;
  opts.keep_last = cfg.checkpoints.keep;
  auto store = snapshot_store::open(cfg.checkpoints.dir, opts);
  if (!store)
    return store.error();
  auto ids = (*store)->committed();
  if (!ids)
    return ids.error();
  if (!ids->empty() && !cfg.checkpoints.resume)
    return make_error(errc::invalid_argument,
                      "checkpoint directory " + cfg.checkpoints.dir.string() + " holds checkpoints " +
                        std::to_string(ids->front()) + ".." + std::to_string(ids->back()) +
                        " of an earlier run: resume that run (keel train --resume DIR, "
                        "checkpoint_config::resume), or give an empty directory");
  if (ids->empty() && cfg.checkpoints.resume)
    return make_error(errc::not_found, "nothing to resume: checkpoint directory " +
                                         cfg.checkpoints.dir.string() + " holds no committed checkpoint");
  return starting_identity(cfg, **store);
}

std::unique_ptr<caf::actor_system_config> system_config(const placed_job_config& c) {
  auto sys_cfg = std::make_unique<caf::actor_system_config>();
  register_message_types(*sys_cfg);
  if (c.placement)
    c.placement->configure(*sys_cfg);
  sys_cfg->set("scheduler.max-threads", static_cast<int>(c.scheduler_threads));
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
  // work its polling would take (keel cluster ran slower with it); and not
  // when the application runs the workers' loops (application_loop), whose
  // threads need the cores the polling would take.
  if (!c.placement && !c.application_loop)
    sys_cfg->set("work-stealing.aggressive-poll-attempts", 100000);
  return sys_cfg;
}

// A request to the controller from a thread that is not an actor's.
template <class Answer, class Timeout, class... Ts>
caf::expected<Answer> ask(caf::actor_system& sys, const caf::actor& controller, Timeout timeout,
                          Ts&&... xs) {
  caf::expected<Answer> out = make_error(errc::shutting_down, "the job is not running");
  if (!controller)
    return out;
  caf::scoped_actor self{sys};
  self->request(controller, timeout, std::forward<Ts>(xs)...)
    .receive([&](Answer& a) { out = std::move(a); },
             [&](caf::error& e) {
               out = e == caf::sec::request_receiver_down
                       ? make_error(errc::shutting_down, "the job is not running")
                       : std::move(e);
             });
  return out;
}

template <class Timeout, class... Ts>
caf::error ask_ok(caf::actor_system& sys, const caf::actor& controller, Timeout timeout,
                  Ts&&... xs) {
  auto r = ask<caf::ok_atom>(sys, controller, timeout, std::forward<Ts>(xs)...);
  return r ? caf::error{} : r.error();
}

// What the controller's requests may take: a kill waits up to 5 s for its
// target's name, a read up to 9 s for each shard.
constexpr std::chrono::minutes request_budget{2};

}  // namespace

// What the application holds. Declared in job.hpp, defined only here.
struct job::impl {
  ~impl();
  // Held for the run's life, released last (after the actor system, whose
  // checkpointer writes the directory, is gone).
  directory_lock lock;
  std::shared_ptr<child_placement> placement;
  std::unique_ptr<caf::actor_system_config> sys_cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<event_feed> feed = std::make_shared<event_feed>();
  caf::actor controller;
  // With job_config::application_loop: what job::client hands out.
  std::shared_ptr<const model> training_model;
  uint64_t steps = 0;
  std::vector<std::shared_ptr<client_channel>> channels;
};

job::impl::~impl() {
  // No callback runs from here on: the application may be tearing down what
  // its callback uses.
  feed->stop_delivering();
  if (controller) {
    (void)ask_ok(*sys, controller, std::chrono::minutes(1), stop_atom::value);
    caf::anon_send_exit(controller, caf::exit_reason::user_shutdown);
    controller = nullptr;
  }
  // The placement's actors live in this system, which waits for them.
  if (placement)
    placement->detach();
  // The members go in reverse order of declaration: the feed (joining its
  // thread), then `sys`, which waits for its actors.
}

job::job(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

job::~job() = default;

caf::expected<std::unique_ptr<job>> job::start(job_config cfg) {
  return start_job(placed_job_config{std::move(cfg), nullptr, {}});
}

caf::expected<std::unique_ptr<job>> start_job(placed_job_config cfg) {
  if (auto err = check(cfg))
    return err;
  auto lock = lock_directory(cfg);
  if (!lock)
    return std::move(lock.error());
  auto identity = check_directory(cfg);
  if (!identity)
    return std::move(identity.error());
  if (cfg.checkpoints.resume) {
    // Workers changed at runtime stay changed (job_workers.cpp).
    auto changed = read_worker_changes(cfg.checkpoints.dir, cfg.training.workers, cfg.training.steps);
    if (!changed)
      return std::move(changed.error());
    if (*changed)
      cfg.training.schedule = std::move(**changed);
  }
  auto p = std::make_unique<job::impl>();
  if (cfg.application_loop && !cfg.placement)  // a cluster's are in its client processes
    for (uint32_t w = 0; w < cfg.training.workers; ++w)
      cfg.channels.push_back(std::make_shared<client_channel>("worker:" + std::to_string(w)));
  p->channels = cfg.channels;
  p->training_model = cfg.training_model;
  p->steps = cfg.training.steps;
  p->lock = std::move(*lock);
  p->placement = cfg.placement;
  p->sys_cfg = system_config(cfg);
  p->sys = std::make_unique<caf::actor_system>(*p->sys_cfg);
  p->controller = spawn_job_controller(*p->sys, std::move(cfg), std::move(*identity), p->feed);
  if (p->placement)
    if (auto err = p->placement->attach(*p->sys, p->controller)) {
      // The controller never began: a stop would wait for the beginning
      // (it holds requests until then), so ~impl would wait out its minute.
      caf::anon_send_exit(p->controller, caf::exit_reason::user_shutdown);
      p->controller = nullptr;
      return err;
    }
  if (auto err = ask_ok(*p->sys, p->controller, caf::infinite, begin_atom::value))
    return err;
  return std::unique_ptr<job>(new job(std::move(p)));
}

caf::expected<job::parameters_now> job::parameters() {
  return ask<parameters_now>(*impl_->sys, impl_->controller, request_budget, params_atom::value);
}

caf::expected<std::vector<float>> job::rows(const std::string& table, const std::vector<uint64_t>& keys) {
  return ask<std::vector<float>>(*impl_->sys, impl_->controller, request_budget, rows_atom::value, table, keys);
}

caf::expected<job::table_now> job::table(const std::string& name) {
  return ask<table_now>(*impl_->sys, impl_->controller, request_budget, table_atom::value, name);
}

caf::error job::stop() {
  return ask_ok(*impl_->sys, impl_->controller, request_budget, stop_atom::value);
}

void job::on_event(std::function<void(const job_event&)> f) {
  impl_->feed->set_callback(std::move(f));
}

caf::expected<job_result> job::wait(std::chrono::milliseconds timeout) {
  auto& j = *impl_;
  if (j.feed->on_feed_thread())
    return make_error(errc::invalid_argument,
                      "job::wait called from an on_event callback: the outcome comes after the "
                      "callback returns");
  if (auto outcome = j.feed->await(timeout))
    return *outcome;
  auto where = ask<std::string>(*j.sys, j.controller, std::chrono::seconds(5), job_status_atom::value);
  return make_error(errc::timeout, "job did not finish within " + std::to_string(timeout.count()) +
                                     " ms (" + (where ? *where : describe(where.error())) + ")");
}

caf::error job::kill(const std::string& name, kill_mode mode) {
  fault f;
  f.kind = mode == kill_mode::exit    ? fault_kind::exit
           : mode == kill_mode::raise ? fault_kind::raise
                                      : fault_kind::kill;
  f.target = name;
  return ask_ok(*impl_->sys, impl_->controller, request_budget, kill_atom::value, f);
}

caf::expected<ps_client> job::client(uint32_t worker) {
  auto& j = *impl_;
  if (j.channels.empty())
    return make_error(errc::invalid_argument,
                      j.placement && j.placement->application_loops()
                        ? "job::client: the job's workers run in client processes (keel::cluster_client)"
                        : "job::client: the job runs its model's own loop (set job_config::application_loop "
                          "to run it from the application)");
  if (worker >= j.channels.size())
    return make_error(errc::not_found, "job::client: no worker:" + std::to_string(worker) + " (the job has " +
                                         std::to_string(j.channels.size()) + " workers)");
  return ps_client(worker, j.steps, j.training_model, j.channels[worker]);
}

caf::expected<uint64_t> job::change_workers(const std::string& items) {
  return ask<uint64_t>(*impl_->sys, impl_->controller, request_budget, workers_atom::value, items);
}

caf::error job::inject(const fault& f) {
  return ask_ok(*impl_->sys, impl_->controller, request_budget, inject_atom::value, f);
}

}  // namespace keel
