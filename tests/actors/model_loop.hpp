#pragma once
// An application's own loop that does what keel's worker does (the batch of
// (seed, epoch, step, worker), its keys, the model's gradient), through a
// ps_client (actors/job/ps_client.hpp): under BSP it ends bit-identical to
// keel's own workers, which the tests of ps_client check and the client
// bench (bench/training/client_bench.cpp) times.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/keel.hpp"

namespace keel::test {

constexpr auto patience = std::chrono::seconds(60);

struct loop_outcome {
  uint64_t pushes = 0;  // pushes acknowledged
  uint64_t moved = 0;   // requests answered step_moved (a restart or rollback moved the worker)
  caf::error error;     // what ended the loop early
};

// What keel's worker computes for a step, done by the application: the
// batch of (seed, epoch, step, worker), its keys, the model's gradient.
struct app_model {
  app_model(const job_config& cfg, uint32_t worker)
      : cfg(cfg), m(*cfg.training_model), scratch(m.make_scratch()), worker(worker),
        spe(steps_per_epoch(m.num_train_examples(), cfg.training.workers, cfg.training.batch_size)) {}

  caf::expected<step_keys> keys_at(uint64_t s) {
    auto es = split_global_step(s, spe);
    batch_position at{cfg.training.seed, es.epoch, es.step, worker, cfg.training.workers,
                      cfg.training.batch_size};
    step_keys keys;
    if (auto err = m.batch_indices(at, batch))
      return err;
    if (auto err = m.sparse_keys(batch, *scratch, keys.sparse))
      return err;
    if (auto err = m.table_keys(batch, *scratch, keys.tables))
      return err;
    return keys;
  }

  // The gradient of the batch keys_at last made, at `p`'s parameters.
  caf::expected<gradient_buffer> gradient(const ps_client& c, const pulled_step& p) {
    auto g = c.gradient_for(p);
    if (auto err = m.gradient(batch, p.view(), *scratch, g))
      return err;
    return g;
  }

  const job_config& cfg;
  const model& m;
  std::unique_ptr<model_scratch> scratch;
  uint32_t worker;
  uint64_t spe;
  std::vector<uint64_t> batch;
};

// One worker's loop: next_step, pull the batch's keys, the gradient, push,
// until the job's steps are done.
loop_outcome run_loop(ps_client c, const job_config& cfg) {
  loop_outcome out;
  app_model app(cfg, c.worker());
  auto s = c.next_step().wait(patience);
  while (s && *s < c.steps()) {
    auto keys = app.keys_at(*s);
    if (!keys) {
      out.error = keys.error();
      return out;
    }
    auto p = c.pull(*s, *keys).wait(patience);
    caf::error failed = p ? caf::error{} : p.error();
    if (p) {
      auto g = app.gradient(c, **p);
      if (!g) {
        out.error = g.error();
        return out;
      }
      auto done = c.push(*s, std::move(*g)).wait(patience);
      if (done && *done != *s) {
        out.error = make_error(errc::invalid_argument, "push of step " + std::to_string(*s) +
                                                           " answered with step " + std::to_string(*done));
        return out;
      }
      if (done) {
        ++out.pushes;
      } else {
        failed = done.error();
      }
    }
    if (failed && !is(failed, errc::step_moved)) {
      out.error = failed;
      return out;
    }
    out.moved += failed ? 1 : 0;
    s = c.next_step().wait(patience);
  }
  if (!s)
    out.error = s.error();
  return out;
}

// The same loop pipelined: the pull of step s + 1 is asked right behind
// the push of step s, before its answer, so the worker starts the next step
// as soon as the push is acknowledged, without waiting for the application
// to ask (one hand-off between the threads a step instead of three). A
// step_moved answer to either sends the loop to next_step().
loop_outcome run_pipelined_loop(ps_client c, const job_config& cfg) {
  loop_outcome out;
  app_model app(cfg, c.worker());
  auto ask = [&](uint64_t s) -> std::optional<client_future<std::shared_ptr<const pulled_step>>> {
    auto keys = app.keys_at(s);
    if (!keys) {
      out.error = keys.error();
      return std::nullopt;
    }
    return c.pull(s, *keys);
  };
  auto s = c.next_step().wait(patience);
  std::optional<client_future<std::shared_ptr<const pulled_step>>> next;
  if (s && *s < c.steps() && !(next = ask(*s)))
    return out;
  while (s && *s < c.steps()) {
    auto p = next->wait(patience);
    caf::error failed = p ? caf::error{} : p.error();
    if (p) {
      app.keys_at(*s);  // the batch of this step again: ask() made the next one's
      auto g = app.gradient(c, **p);
      if (!g) {
        out.error = g.error();
        return out;
      }
      auto done = c.push(*s, std::move(*g));
      if (*s + 1 < c.steps() && !(next = ask(*s + 1)))
        return out;
      auto acked = done.wait(patience);
      if (acked)
        ++out.pushes;
      else
        failed = acked.error();
      if (!failed) {
        s = *s + 1;
        continue;
      }
    }
    if (!is(failed, errc::step_moved)) {
      out.error = failed;
      return out;
    }
    ++out.moved;
    if (next && !next->ready())
      (void)next->wait(patience);  // answered step_moved too, or by the step it asked: either way, done with it
    s = c.next_step().wait(patience);
    if (s && *s < c.steps() && !(next = ask(*s)))
      return out;
  }
  if (!s)
    out.error = s.error();
  return out;
}

// Starts `cfg` with the application's loop, runs one loop thread per
// worker (pipelined or not), and returns the job's result with each loop's
// outcome.
caf::expected<job_result> run_with_clients(job_config cfg, std::vector<loop_outcome>& loops, bool pipelined = false) {
  cfg.application_loop = true;
  auto j = job::start(cfg);
  if (!j)
    return j.error();
  std::vector<ps_client> clients;
  for (uint32_t w = 0; w < cfg.training.workers; ++w) {
    auto c = (*j)->client(w);
    if (!c)
      return c.error();
    clients.push_back(*c);
  }
  loops.assign(cfg.training.workers, {});
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < cfg.training.workers; ++w)
    threads.emplace_back(
        [&, w] { loops[w] = pipelined ? run_pipelined_loop(clients[w], cfg) : run_loop(clients[w], cfg); });
  for (auto& t : threads) t.join();
  return (*j)->wait(std::chrono::hours(1));
}

}  // namespace keel::test
