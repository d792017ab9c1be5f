// The end of a job: read every shard's final state (as a snapshot, so the
// read-out is validated like any restore), assemble the parameters, hash
// them, evaluate the model and stop the tree.
#include <openssl/evp.h>

#include <cmath>
#include <cstdio>

#include "actors/faults/link_faults.hpp"
#include "actors/job/job_impl.hpp"
#include "storage/snapshot.hpp"

namespace keel {

std::string params_sha256(const std::vector<float>& dense, const std::vector<float>& sparse) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  auto* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, dense.data(), dense.size() * sizeof(float));
  EVP_DigestUpdate(ctx, sparse.data(), sparse.size() * sizeof(float));
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  char buf[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", md[i]);
    hex += buf;
  }
  return hex;
}

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

}  // namespace

caf::expected<bool> job::impl::read_parameters(bool stop_at_incomplete) {
  auto& self = *ctl;
  auto& layout = cfg.training_model->layout();
  auto dense_size = layout.dense_size();
  result.dense.assign(dense_size, 0.0f);
  result.sparse.assign(layout.sparse_key_count(), 0.0f);
  result.pushes_applied = 0;
  caf::error failure;
  bool complete = true;  // every shard has applied every worker's last push
  for (uint32_t i = 0; i < cfg.shards && !failure; ++i) {
    // A shard (or the whole tree) restarting now answers later: the caller
    // reads again after its next messages.
    auto name = to_string(actor_id::shard(i));
    // The directory may still name an incarnation that has just died (its
    // down not yet seen); a mid-run read then waits for the next one, once.
    uint64_t incarnation = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      caf::expected<caf::actor> shard = make_error(errc::not_found, name + " has no entry");
      if (!tree) {
        shard = make_error(errc::not_found, "'" + name + "': the job is not running");
      } else if (auto entry = supervision::lookup(*sys, tree->directory(), name, std::chrono::seconds(2));
                 entry && entry->state == supervision::name_state::up && entry->incarnation > incarnation) {
        shard = entry->handle;
        incarnation = entry->incarnation;
      } else {
        shard = supervision::await_name(*sys, tree->directory(), name, incarnation + 1, std::chrono::seconds(2));
        if (shard)
          if (auto again = supervision::lookup(*sys, tree->directory(), name, std::chrono::seconds(2)))
            incarnation = again->incarnation;
      }
      if (!shard && !stop_at_incomplete)
        return make_error(errc::not_found, name + " is restarting; its parameters cannot be read now");
      if (!shard)
        return false;
      if (!complete && stop_at_incomplete)
        break;
      bool receiver_down = false;
      bool was_complete = complete;
      self->request(*shard, std::chrono::seconds(5), params_atom::value)
        .receive(
          [&](const shard_snapshot_msg& m) {
            auto d = decode(m);
            if (!d) {
              failure = d.error();
              return;
            }
            auto s = d->root();
            auto range = parts[i].dense;
            if (auto err = find_tensor(s, "dense", result.dense.data() + range.begin, range.size() * 4)) {
              failure = err;
              return;
            }
            auto rows = tensor_rows(s, "sparse.keys");
            std::vector<uint64_t> keys(rows);
            std::vector<float> entries(rows * 3);
            if (auto err = find_tensor(s, "sparse.keys", keys.data(), rows * 8)) {
              failure = err;
              return;
            }
            if (auto err = find_tensor(s, "sparse.entries", entries.data(), rows * 12)) {
              failure = err;
              return;
            }
            for (size_t k = 0; k < rows; ++k)
              if (keys[k] >= dense_size && keys[k] - dense_size < result.sparse.size())
                result.sparse[keys[k] - dense_size] = entries[3 * k];
            for (auto a : s.getApplied()) {
              result.pushes_applied += a.getSeq();
              complete = complete && a.getSeq() == cfg.steps;
            }
          },
          [&](caf::error& err) {
            // The shard died under the request (a kill, a crash): it restarts
            // and the read-out tries again (mid-run: once, right away).
            complete = false;
            receiver_down = err == caf::sec::request_receiver_down;
            if (!stop_at_incomplete && !(receiver_down && attempt == 0))
              failure = make_error(errc::not_found, name + " did not answer: " + describe(err));
          });
      if (!receiver_down || stop_at_incomplete)
        break;
      complete = was_complete;  // the retry decides
    }
  }
  if (failure)
    return failure;
  return complete;
}

caf::expected<job_result> job::impl::finish() {
  // The run's time ends here, with every shard's parameters read: scoring
  // them on the held-out set below is not training (the plain trainer does
  // not count its evaluation either).
  result.seconds = static_cast<double>(elapsed_ms()) / 1000.0;
  result.pushes_acked = 0;
  result.steps = cfg.steps;
  result.window_wait_seconds = 0;
  for (auto& [worker, r] : reports) {
    result.pushes_acked += r.pushes_acked;
    result.steps = std::min(result.steps, r.steps);
    result.window_wait_seconds += static_cast<double>(r.window_wait_us) / 1e6;
  }
  result.params_sha256 = params_sha256(result.dense, result.sparse);
  result.messages_hit = faults->links()->hits();
  result.fault_plan = faults->injected();
  result.faults_not_injected = faults->close_run();
  result.faults_injected = faults->planned_injected();
  auto scratch = cfg.training_model->make_scratch();
  auto q = cfg.training_model->evaluate({result.dense, result.sparse}, *scratch);
  if (!q)
    return q.error();
  result.quality = *q;
  result.resumed_at_step = resumed_step;
  result.samples_per_second =
    static_cast<double>((result.steps - std::min(result.steps, resumed_step)) * cfg.workers *
                        cfg.batch_size) / std::max(result.seconds, 1e-9);
  stop_tree_and_drain();
  return result;
}

// A progress line: the mean training loss since the last one, samples/s,
// restarts, and (when asked) the held-out score of the parameters now.
void job::impl::report_progress(uint64_t step) {
  const auto reached = std::chrono::steady_clock::now();
  auto& j = *this;
  uint64_t restarts = 0;
  for (auto& [name, n] : j.result.restarts)
    restarts += n;
  double secs = std::max(static_cast<double>(j.elapsed_ms()) / 1000.0, 1e-3);
  auto spe = std::max<uint64_t>(
    1, steps_per_epoch(j.cfg.training_model->num_train_examples(), j.cfg.workers, j.cfg.batch_size));
  auto e = make_job_event(event_kind::progress, "job", {});
  e.step = step;
  e.loss = j.loss_count ? j.loss_sum / static_cast<double>(j.loss_count) : NAN;
  // Steps this process ran: a resumed run's clock starts at its checkpoint.
  auto ran = step - std::min(step, j.resumed_step);
  e.samples_per_second = static_cast<double>(ran * j.cfg.workers * j.cfg.batch_size) / secs;
  for (auto s : j.worker_step) e.pushes_acked += s * j.cfg.shards;
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
    if (read)
      e.pushes_applied = j.result.pushes_applied;
    auto scratch = j.cfg.training_model->make_scratch();
    auto q = read ? j.cfg.training_model->evaluate({j.result.dense, j.result.sparse}, *scratch)
                  : caf::expected<evaluation>(read.error());
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
  }
  j.loss_sum = 0;
  j.loss_count = 0;
  j.record_at(std::move(e), reached);
}

}  // namespace keel
