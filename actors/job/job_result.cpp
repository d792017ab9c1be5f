// The read-out: every shard's state read as a snapshot (so it is validated
// like any restore), shard by shard, each read a chain of continuations on
// the controller's thread (find the shard's current incarnation, ask it,
// take its tensors); progress events, scored by such a read when asked; and
// the end of the run: the final read, retried until every shard holds every
// push, then the result (hash, evaluation) and the tree stopped.
#include <cmath>
#include <cstdio>

#include "actors/faults/link_faults.hpp"
#include "actors/core/shard_snapshot.hpp"
#include "actors/core/update_rules.hpp"
#include "actors/job/job_controller.hpp"
#include "actors/job/slice_evaluation.hpp"
#include "messages/decode.hpp"
#include "messages/errors.hpp"
#include "storage/snapshot.hpp"
#include "supervision/directory.hpp"

namespace keel {

namespace {

caf::error find_tensor(schema::ShardSnapshot::Reader s, const char* name, void* out, size_t bytes) {
  for (auto t : s.getTensors())
    if (t.getName() == name)
      return copy_tensor(t, out, bytes);
  return make_error(errc::not_found, std::string("final read-out: tensor '") + name + "' missing");
}

uint64_t tensor_rows(schema::ShardSnapshot::Reader s, const char* name) {
  for (auto t : s.getTensors())
    if (t.getName() == name && t.getShape().size() >= 1)
      return t.getShape()[0];
  return 0;
}

// One read of every shard's parameters, in shard order. The directory may
// still name an incarnation that has just died (its down not yet seen); a
// mid-run read then waits for the next one, once.
struct shard_read {
  controller_actor* self;
  caf::actor directory;
  bool final_read;
  std::function<void(caf::expected<parameters_read>)> done;
  parameters_read out;
  uint32_t shard = 0;
  int attempt = 0;           // of this shard: a second after its incarnation died under the first
  uint64_t incarnation = 0;  // of this shard, the one last found

  std::string name() const { return to_string(actor_id::shard(shard)); }
};

using read_ptr = std::shared_ptr<shard_read>;

void find_shard(const read_ptr& r);

// Takes one shard's tensors and applied seqs into the read.
caf::error take_shard(shard_read& r, const shard_snapshot_msg& m) {
  auto& st = r.self->state;
  auto d = decode(m);
  if (!d)
    return d.error();
  auto s = d->root();
  auto dense_size = st.cfg.training_model->layout().dense_size();
  auto range = st.run.parts[r.shard].dense;
  if (auto err = find_tensor(s, "dense", r.out.dense.data() + range.begin, range.size() * 4))
    return err;
  auto rows = tensor_rows(s, "sparse.keys");
  std::vector<uint64_t> keys(rows);
  std::vector<float> entries(rows * 3);
  if (auto err = find_tensor(s, "sparse.keys", keys.data(), rows * 8))
    return err;
  if (auto err = find_tensor(s, "sparse.entries", entries.data(), rows * 12))
    return err;
  for (size_t k = 0; k < rows; ++k)
    if (keys[k] >= dense_size && keys[k] - dense_size < r.out.sparse.size())
      r.out.sparse[keys[k] - dense_size] = entries[3 * k];
  if (auto tables = st.cfg.training_model->layout().tables().size()) {
    std::vector<table_digest> digests(tables);
    if (auto err = find_tensor(s, table_digests_tensor, digests.data(), tables * 32))
      return err;
    r.out.table_digests.insert(r.out.table_digests.end(), digests.begin(), digests.end());
    std::vector<uint64_t> counts(tables * table_counter_fields);
    if (auto err = find_tensor(s, table_counters_tensor, counts.data(), counts.size() * 8))
      return err;
    r.out.table_counts.resize(tables);
    for (size_t t = 0; t < tables; ++t) {
      const uint64_t* c = counts.data() + t * table_counter_fields;
      auto& sum = r.out.table_counts[t];
      sum.rows += c[0];
      sum.evictions += c[1];
      sum.admissions_refused += c[2];
      sum.full_refused += c[3];
      sum.bytes += c[4];
    }
  }
  uint32_t w = 0;
  auto& workers = st.cfg.training.schedule;
  if (r.out.applied_seqs.size() <= r.shard)
    r.out.applied_seqs.resize(r.shard + 1);
  r.out.applied_seqs[r.shard].clear();  // a second attempt at this shard reads it anew
  for (auto a : s.getApplied()) r.out.applied_seqs[r.shard].push_back(a.getSeq());
  for (auto a : s.getApplied()) {
    // A worker still held in reserve took part in no step.
    if (!workers.elastic() || !workers.reserved(w)) {
      r.out.pushes_applied += a.getSeq();
      if (r.out.applied_by_worker.size() <= w)
        r.out.applied_by_worker.resize(w + 1, 0);
      r.out.applied_by_worker[w] += a.getSeq();
      // Each worker's last push: the run's last step, or the one before it left.
      auto end = workers.elastic() ? std::min(st.cfg.training.steps, workers.span(w).end) : st.cfg.training.steps;
      // One that left when no node could run it may have pushed past its
      // leave step under SSP or ASP, where a checkpoint's shards stand at
      // steps of their own (job_workers.cpp): those pushes stay.
      bool left = end < st.cfg.training.steps && st.cfg.training.rule.kind != consistency_kind::bsp;
      r.out.complete = r.out.complete && (left ? a.getSeq() >= end : a.getSeq() == end);
    }
    ++w;
  }
  return {};
}

// The shard (or the whole tree) restarting now answers later: a final read
// is incomplete, a mid-run read fails.
void shard_unavailable(const read_ptr& r, caf::error why) {
  if (!r->final_read)
    return r->done(std::move(why));
  r->out.complete = false;
  r->done(std::move(r->out));
}

void ask_shard(const read_ptr& r, const caf::actor& shard) {
  r->self->request(shard, std::chrono::seconds(5), params_atom::value)
    .then(
      [r](const shard_snapshot_msg& m) {
        if (auto err = take_shard(*r, m))
          return r->done(err);  // a shard's state failed validation
        ++r->shard;
        r->attempt = 0;
        r->incarnation = 0;
        if (r->shard == r->self->state.cfg.training.shards || (r->final_read && !r->out.complete))
          return r->done(std::move(r->out));
        find_shard(r);
      },
      [r](caf::error& err) {
        // The shard died under the request (a kill, a crash): it restarts,
        // and the read tries again (mid-run: once, right away).
        bool receiver_down = err == caf::sec::request_receiver_down;
        if (!r->final_read && receiver_down && r->attempt == 0) {
          r->attempt = 1;
          return find_shard(r);
        }
        shard_unavailable(r, make_error(errc::not_found, r->name() + " did not answer: " + describe(err)));
      });
}

// The shard's next incarnation, once it is up (two seconds at most).
void await_shard(const read_ptr& r) {
  auto self = r->self;
  auto dir = r->directory;
  self->request(dir, std::chrono::seconds(3), supervision::await_name_atom::value, r->name(),
                r->incarnation + 1, caf::timespan{std::chrono::seconds(2)})
    .then(
      [r, self, dir](caf::actor& shard) {
        self->request(dir, std::chrono::seconds(2), supervision::lookup_atom::value, r->name())
          .then(
            [r, shard](const supervision::directory_update& u) {
              r->incarnation = u.incarnation;
              ask_shard(r, shard);
            },
            [r, shard](caf::error&) { ask_shard(r, shard); });
      },
      [r](caf::error&) {
        shard_unavailable(r, make_error(errc::not_found, r->name() +
                                                           " is restarting; its parameters cannot be read now"));
      });
}

void find_shard(const read_ptr& r) {
  r->self->request(r->directory, std::chrono::seconds(2), supervision::lookup_atom::value, r->name())
    .then(
      [r](const supervision::directory_update& u) {
        if (u.state == supervision::name_state::up && u.incarnation > r->incarnation) {
          r->incarnation = u.incarnation;
          return ask_shard(r, u.handle);
        }
        await_shard(r);
      },
      [r](caf::error&) { await_shard(r); });
}

void scored(controller_actor* self, caf::expected<evaluation> q);

std::vector<table_stats> table_results(const job_config& cfg, const std::vector<table_counters>& counts) {
  std::vector<table_stats> out;
  auto& specs = cfg.training_model->layout().tables();
  for (size_t t = 0; t < specs.size() && t < counts.size(); ++t) {
    const uint64_t floats_per_value = 1 + slots_of(rule_of(cfg.training, specs[t].name));
    table_stats s;
    s.name = specs[t].name;
    s.dim = specs[t].dim;
    s.rows = counts[t].rows;
    s.evictions = counts[t].evictions;
    s.admissions_refused = counts[t].admissions_refused;
    s.full_refused = counts[t].full_refused;
    s.bytes = counts[t].bytes;
    s.parameter_bytes = s.rows * s.dim * floats_per_value * sizeof(float);
    out.push_back(std::move(s));
  }
  return out;
}

// The pushes each shard acknowledged: a reporting worker's spread evenly
// (each of its steps pushes to every shard), a worker that left before the
// last tree started the ones each shard holds of it, less the seqs a
// worker that joined at step S starts from.
std::vector<uint64_t> acked_by_shard(const job_config& cfg, const progress_state& progress,
                                     const parameters_read& read) {
  const uint32_t shards = cfg.training.shards;
  std::vector<uint64_t> out(shards, 0);
  for (auto& [worker, r] : progress.reports)
    for (auto& n : out) n += r.pushes_acked / shards;
  for (auto w : progress.done)
    if (!progress.reports.count(w))
      for (uint32_t s = 0; s < shards && s < read.applied_seqs.size(); ++s)
        out[s] += w < read.applied_seqs[s].size() ? read.applied_seqs[s][w] : 0;
  const auto& schedule = cfg.training.schedule;
  for (uint32_t w = 0; w < schedule.slots() && schedule.elastic(); ++w)
    if (!schedule.reserved(w))
      for (auto& n : out) n -= std::min(n, schedule.span(w).begin);
  return out;
}

// Completes the result from the final read, evaluates, stops the tree and
// ends the job with the result.
void finish(controller_actor* self, parameters_read read) {
  auto& st = self->state;
  auto& cfg = st.cfg;
  auto& result = st.readout.result;
  st.run.core.finishing();
  // The run's time ends here, with every shard's parameters read: scoring
  // them on the held-out set below is not training (the plain trainer does
  // not count its evaluation either).
  result.seconds = static_cast<double>(elapsed_ms(st)) / 1000.0;
  result.dense = std::move(read.dense);
  result.sparse = std::move(read.sparse);
  // A worker that joins at step S holds seqs from S on (shard_core's
  // spans): the pushes it made are its seqs less S, at every shard.
  uint64_t not_pushed = 0;
  for (uint32_t w = 0; w < cfg.training.schedule.slots() && cfg.training.schedule.elastic(); ++w)
    if (!cfg.training.schedule.reserved(w))  // a reserved worker's seqs are not counted (read_shard)
      not_pushed += cfg.training.schedule.span(w).begin * cfg.training.shards;
  result.pushes_applied = read.pushes_applied - std::min(read.pushes_applied, not_pushed);
  result.pushes_acked = 0;
  result.steps = cfg.training.steps;
  result.window_wait_seconds = 0;
  result.peak_log_bytes.assign(cfg.training.workers, 0);
  for (auto& [worker, r] : st.progress.reports) {
    if (worker < result.peak_log_bytes.size())
      result.peak_log_bytes[worker] = r.peak_log_bytes;
    result.pushes_acked += r.pushes_acked;
    // A worker that left ran its steps when it reached its leave step.
    auto end = cfg.training.schedule.elastic() ? std::min(cfg.training.steps, cfg.training.schedule.span(worker).end)
                                               : cfg.training.steps;
    result.steps = std::min(result.steps, r.steps >= end ? cfg.training.steps : r.steps);
    result.window_wait_seconds += static_cast<double>(r.window_wait_us) / 1e6;
  }
  // A worker that left before the last tree started was not started again
  // (job_tree.cpp): its acknowledged pushes are the ones the shards hold.
  for (auto w : st.progress.done)
    if (!st.progress.reports.count(w) && w < read.applied_by_worker.size())
      result.pushes_acked += read.applied_by_worker[w];
  result.pushes_acked -= std::min(result.pushes_acked, not_pushed);
  result.pushes_acked_by_shard = acked_by_shard(cfg, st.progress, read);

  result.params_sha256 = read.table_digests.empty()
                           ? params_sha256(result.dense, result.sparse)
                           : params_sha256(result.dense, result.sparse, read.table_digests);
  result.tables = table_results(cfg, read.table_counts);
  result.messages_hit = st.faults->links()->hits();
  result.fault_plan = st.faults->injected();
  result.worker_changes = st.cfg.training.schedule.to_string();
  result.faults_not_injected = st.faults->close_run();
  result.faults_injected = st.faults->planned_injected();
  st.readout.evaluating_since = std::chrono::steady_clock::now();
  if (cfg.training_model->evaluates_slices())
    return evaluate_by_slices(self, result.dense, [self](caf::expected<evaluation> q) { scored(self, std::move(q)); });
  auto scratch = cfg.training_model->make_scratch();
  scored(self, cfg.training_model->evaluate({result.dense, result.sparse}, *scratch));
}

// The end of finish, once the held-out set is scored.
void scored(controller_actor* self, caf::expected<evaluation> q) {
  auto& st = self->state;
  auto& cfg = st.cfg;
  auto& result = st.readout.result;
  if (!q)
    return end_job(self, q.error());
  result.quality = *q;
  result.evaluation_seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - st.readout.evaluating_since).count();
  auto resumed = st.run.resumed_step;
  result.resumed_at_step = resumed;
  auto& workers = cfg.training.schedule;
  auto worker_steps = workers.elastic()
                        ? workers.worker_steps(result.steps) - workers.worker_steps(std::min(result.steps, resumed))
                        : (result.steps - std::min(result.steps, resumed)) * cfg.training.workers;
  result.samples_per_second =
    static_cast<double>(worker_steps * cfg.training.batch_size) / std::max(result.seconds, 1e-9);
  stop_tree_and_drain(self, [self] { end_job(self, self->state.readout.result); });
}

void record_score(controller_actor* self, caf::expected<evaluation> q);

// Scores the oldest waiting progress event with the parameters the shards
// hold now, records it, and goes on with the next.
void score_next(controller_actor* self) {
  read_parameters(self, false, [self](caf::expected<parameters_read> read) {
    auto& st = self->state;
    auto& scoring = st.readout.scoring;
    if (scoring.empty())
      return;  // the run ended meanwhile (end_job recorded it unscored)
    if (read)
      scoring.front().event.pushes_applied = read->pushes_applied;
    if (read && st.cfg.training_model->evaluates_slices())
      return evaluate_by_slices(self, read->dense,
                                [self](caf::expected<evaluation> q) { record_score(self, std::move(q)); });
    auto scratch = st.cfg.training_model->make_scratch();
    record_score(self, read ? st.cfg.training_model->evaluate({read->dense, read->sparse}, *scratch)
                            : caf::expected<evaluation>(read.error()));
  });
}

// Records the oldest waiting progress event with its score `q`, and goes on.
void record_score(controller_actor* self, caf::expected<evaluation> q) {
  auto& scoring = self->state.readout.scoring;
  if (scoring.empty())
    return;  // the run ended meanwhile (end_job recorded it unscored)
  auto& [e, reached] = scoring.front();
  char line[256];
  if (q && q->accuracy) {
    e.accuracy = *q->accuracy;
    std::snprintf(line, sizeof(line), " accuracy %.4f", *q->accuracy);
  } else if (q && q->log_loss) {
    std::snprintf(line, sizeof(line), " test log loss %.4f", *q->log_loss);
  } else if (q && !q->metrics.empty()) {
    std::snprintf(line, sizeof(line), " test %s %.4f", q->metrics.front().name.c_str(),
                  q->metrics.front().value);
  } else if (q) {
    line[0] = '\0';
  } else {
    std::snprintf(line, sizeof(line), " (no evaluation: %s)", describe(q.error()).c_str());
  }
  e.detail += line;
  append_event(self, std::move(e), reached);
  scoring.pop_front();
  release_held(self);
  if (!scoring.empty())
    return score_next(self);
  follow_up(self);  // the faults held back for the score
  maybe_finish(self);
}

}  // namespace

void read_parameters(controller_actor* self, bool final_read,
                     std::function<void(caf::expected<parameters_read>)> done) {
  auto& st = self->state;
  if (!st.run.tree) {
    if (!final_read)
      return done(make_error(errc::not_found, "shard:0: the job is not running"));
    parameters_read none;
    none.complete = false;
    return done(std::move(none));
  }
  auto r = std::make_shared<shard_read>(shard_read{self, st.run.tree->directory(), final_read, std::move(done), {}});
  auto& layout = st.cfg.training_model->layout();
  r->out.dense.assign(layout.dense_size(), 0.0f);
  r->out.sparse.assign(layout.sparse_key_count(), 0.0f);
  find_shard(r);
}

namespace {

// The checkpoint of the run's last checkpoint step is its last state: the
// run ends once that checkpoint has committed, failed or been lost (the
// shards write it while the workers finish), so that a resume after it
// starts at the end. Waited for at most checkpoints.timeout once every
// worker is done; returns true while still waiting.
bool awaiting_final_checkpoint(controller_actor* self) {
  auto& st = self->state;
  auto every = st.cfg.checkpoints.every;
  auto last = every == 0 ? 0 : st.cfg.training.steps - st.cfg.training.steps % every;
  auto& since = st.readout.final_checkpoint_since;
  if (last == 0 || st.progress.checkpoints->released() >= last)
    return false;
  auto now = std::chrono::steady_clock::now();
  if (!since)
    since = now;
  if (now - *since >= st.cfg.checkpoints.timeout)
    return false;
  self->delayed_send(self, st.cfg.checkpoints.timeout - (now - *since), reread_atom::value);
  return true;
}

}  // namespace

void maybe_finish(controller_actor* self) {
  auto& st = self->state;
  auto& readout = st.readout;
  if (!st.run.core.running() || st.progress.done.size() != st.cfg.training.workers ||
      readout.final_reading || !readout.scoring.empty() || !readout.node_fault_marks.empty())
    return;
  if (awaiting_final_checkpoint(self))
    return;  // on_committed or on_checkpoint_failed call again
  // Runs until every shard holds every push: faults may still strike after
  // the workers' last step (a shard restarts and needs their replay, the
  // root dies and the job rolls back), so an incomplete read is tried again
  // a little later, and a read a rollback overtook counts for nothing.
  readout.final_reading = true;
  auto epoch = st.run.core.epoch();
  read_parameters(self, true, [self, epoch](caf::expected<parameters_read> read) {
    auto& st = self->state;
    st.readout.final_reading = false;
    if (!st.run.core.read_counts(epoch))
      return maybe_finish(self);
    if (!read)
      return end_job(self, read.error());  // a shard's state failed validation
    if (!read->complete) {
      self->delayed_send(self, std::chrono::milliseconds(20), reread_atom::value);
      return;
    }
    finish(self, std::move(*read));
  });
}

// A progress line: the mean training loss since the last one, samples/s,
// restarts, and (when asked) the held-out score of the parameters then.
void report_progress(controller_actor* self, uint64_t step) {
  const auto reached = std::chrono::steady_clock::now();
  auto& st = self->state;
  auto& cfg = st.cfg;
  auto& p = st.progress;
  uint64_t restarts = 0;
  for (auto& [name, n] : st.readout.result.restarts)
    restarts += n;
  double secs = std::max(static_cast<double>(elapsed_ms(st)) / 1000.0, 1e-3);
  auto spe = std::max<uint64_t>(
    1, steps_per_epoch(cfg.training_model->num_train_examples(), cfg.training.workers, cfg.training.batch_size));
  auto e = make_job_event(event_kind::progress, "job", {});
  e.step = step;
  e.loss = p.loss_count ? p.loss_sum / static_cast<double>(p.loss_count) : NAN;
  // Steps this process ran: a resumed run's clock starts at its checkpoint.
  auto ran = step - std::min(step, st.run.resumed_step);
  e.samples_per_second = static_cast<double>(ran * cfg.training.workers * cfg.training.batch_size) / secs;
  for (auto s : p.worker_step) e.pushes_acked += s * cfg.training.shards;
  char line[256];
  std::snprintf(line, sizeof(line), "epoch %llu step %llu/%llu loss %.4f samples/s %.0f restarts %llu",
                static_cast<unsigned long long>(step / spe), static_cast<unsigned long long>(step),
                static_cast<unsigned long long>(cfg.training.steps), e.loss, e.samples_per_second,
                static_cast<unsigned long long>(restarts));
  e.detail = line;
  p.loss_sum = 0;
  p.loss_count = 0;
  if (!cfg.progress.accuracy)
    return record_at(self, std::move(e), reached);
  auto& scoring = st.readout.scoring;
  scoring.push_back({std::move(e), reached});
  if (scoring.size() == 1)
    score_next(self);
}

}  // namespace keel
