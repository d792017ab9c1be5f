// The meeting point of an application's loop and its worker
// (client_channel.hpp): requests kept under one lock, answers collected
// while it is held and given after it is released, since an answer runs
// the application's callbacks, which may ask the channel again.
#include "actors/core/client_channel.hpp"

namespace keel {

namespace {

void run(std::vector<std::function<void()>>& answers) {
  for (auto& a : answers) a();
}

}  // namespace

client_channel::client_channel(std::string worker) : worker_(std::move(worker)) {}

caf::error client_channel::moved(const char* what, uint64_t asked, uint64_t at) const {
  return make_error(errc::step_moved, worker_ + ": " + what + " of step " + std::to_string(asked) +
                                          ", but the worker is at step " + std::to_string(at) +
                                          " (a restart or a rollback moved it): ask next_step() and "
                                          "go on from there");
}

caf::error client_channel::past_the_end(uint64_t asked, uint64_t steps) const {
  return make_error(errc::invalid_argument, worker_ + ": pull of step " + std::to_string(asked) +
                                                ": the worker has run all " + std::to_string(steps) +
                                                " steps of the job");
}

caf::error client_channel::check_gradient(const gradient_buffer& g, const pulled_step& p) const {
  auto bad = [&](std::string what) {
    return make_error(errc::invalid_argument,
                      worker_ + ": the gradient of step " + std::to_string(p.step) + " " + what);
  };
  if (g.dense.size() != p.dense.size())
    return bad("has " + std::to_string(g.dense.size()) + " dense values, the model " +
               std::to_string(p.dense.size()));
  if (g.sparse_keys != p.sparse_keys || g.sparse_values.size() != p.sparse_keys.size())
    return bad("must have the pulled " + std::to_string(p.sparse_keys.size()) +
               " sparse keys with a value each");
  if (g.tables.size() != p.table_keys.size())
    return bad("has " + std::to_string(g.tables.size()) + " tables, the model " +
               std::to_string(p.table_keys.size()));
  for (size_t t = 0; t < g.tables.size(); ++t) {
    auto& keys = p.table_keys[t];
    if (g.tables[t].keys != keys)
      return bad("must have table " + std::to_string(t) + "'s " + std::to_string(keys.size()) +
                 " pulled keys, in the order pulled");
    if (g.tables[t].rows.size() != p.table_rows[t].size())
      return bad("has " + std::to_string(g.tables[t].rows.size()) + " floats for table " +
                 std::to_string(t) + "'s rows, the pull " + std::to_string(p.table_rows[t].size()));
  }
  return {};
}

client_future<uint64_t> client_channel::next_step() {
  client_future<uint64_t> f;
  std::unique_lock<std::mutex> g(m_);
  if (closed_) {
    auto why = closed_;
    g.unlock();
    f.set(why);
  } else if (finished_) {
    auto steps = *finished_;
    g.unlock();
    f.set(steps);
  } else if (ready_ && !(pull_ && pull_->step == *ready_)) {
    auto at = *ready_;
    g.unlock();
    f.set(at);
  } else {
    step_waiters_.push_back(f);
  }
  return f;
}

caf::error client_channel::other_keys(uint64_t step) const {
  return make_error(errc::invalid_argument, worker_ + ": a pull of step " + std::to_string(step) +
                                                " with other keys than its first pull's: a step is pulled "
                                                "once, a retry asks the same keys");
}

client_future<std::shared_ptr<const pulled_step>> client_channel::pull(uint64_t step, step_keys keys) {
  client_future<std::shared_ptr<const pulled_step>> f;
  std::unique_lock<std::mutex> g(m_);
  caf::error refused = closed_;
  // A retry (the application's wait for the first ran out): the first's
  // answer, whether it is still to come or already given while the worker
  // holds the step.
  if (!refused && pull_ && pull_->step == step) {
    if (pull_->keys.sparse == keys.sparse && pull_->keys.tables == keys.tables)
      return pull_->answer;
    refused = other_keys(step);
  }
  if (!refused && !pull_ && holding_ == step && delivered_ && delivered_->step == step) {
    if (delivered_->sparse_keys != keys.sparse || delivered_->table_keys != keys.tables)
      refused = other_keys(step);
    else {
      auto p = delivered_;
      g.unlock();
      f.set(p);
      return f;
    }
  }
  if (!refused && pull_)
    refused = make_error(errc::invalid_argument, worker_ + ": a pull of step " +
                                                     std::to_string(pull_->step) +
                                                     " is outstanding: one pull at a time");
  if (!refused && finished_)
    refused = past_the_end(step, *finished_);
  if (!refused && ready_ && *ready_ != step)
    refused = moved("pull", step, *ready_);
  if (refused) {
    g.unlock();
    f.set(refused);
    return f;
  }
  pull_ = pull_request{step, std::move(keys), f, false};
  auto wake = wake_;
  g.unlock();
  if (wake)
    wake();
  return f;
}

client_future<uint64_t> client_channel::push(uint64_t step, gradient_buffer grad) {
  client_future<uint64_t> f;
  std::unique_lock<std::mutex> g(m_);
  caf::error refused = closed_;
  if (!refused && push_)
    refused = make_error(errc::invalid_argument, worker_ + ": a push of step " +
                                                     std::to_string(push_->step) +
                                                     " is outstanding: one push at a time");
  if (!refused && (!delivered_ || delivered_->step != step))
    refused = make_error(errc::invalid_argument,
                         worker_ + ": push of step " + std::to_string(step) + " without its pull" +
                           (delivered_ ? " (the last pull answered was of step " +
                                           std::to_string(delivered_->step) + ")"
                                       : std::string()));
  if (!refused)
    refused = check_gradient(grad, *delivered_);
  if (refused) {
    g.unlock();
    f.set(refused);
    return f;
  }
  push_ = push_request{step, std::move(grad), f};
  auto wake = wake_;
  g.unlock();
  if (wake)
    wake();
  return f;
}

void client_channel::close(caf::error why) {
  later out;
  {
    std::lock_guard<std::mutex> g(m_);
    if (closed_)
      return;
    closed_ = why;
    if (pull_)
      out.push_back([a = pull_->answer, why] { a.set(why); });
    if (push_)
      out.push_back([a = push_->answer, why] { a.set(why); });
    for (auto& w : step_waiters_) out.push_back([w, why] { w.set(why); });
    pull_.reset();
    push_.reset();
    holding_.reset();
    step_waiters_.clear();
    wake_ = nullptr;
  }
  run(out);
}

uint64_t client_channel::attach(std::function<void()> wake) {
  std::lock_guard<std::mutex> g(m_);
  wake_ = std::move(wake);
  ready_.reset();
  holding_.reset();
  if (pull_)
    pull_->taken = false;  // the incarnation that took it is gone
  return ++token_;
}

void client_channel::settle_push(uint64_t at, later& out) {
  if (!push_ || push_->step == at)
    return;
  if (push_->step < at)
    out.push_back([a = push_->answer, s = push_->step] { a.set(s); });
  else
    out.push_back([a = push_->answer, e = moved("push", push_->step, at)] { a.set(e); });
  push_.reset();
}

std::optional<step_keys> client_channel::ready_at(uint64_t token, uint64_t step) {
  later out;
  std::optional<step_keys> keys;
  {
    std::lock_guard<std::mutex> g(m_);
    if (token != token_ || closed_)
      return std::nullopt;
    finished_.reset();
    holding_.reset();
    settle_push(step, out);
    if (push_ && delivered_ && delivered_->step == step) {
      // The worker restarted after the pull was answered: pull it again.
      keys = step_keys{delivered_->sparse_keys, delivered_->table_keys};
    } else if (pull_ && pull_->step == step) {
      pull_->taken = true;
      keys = pull_->keys;
    } else if (pull_) {
      out.push_back([a = pull_->answer, e = moved("pull", pull_->step, step)] { a.set(e); });
      pull_.reset();
    }
    // Waiters learn the step only when the worker waits for its pull: not
    // while it pulls for a request already made.
    ready_ = keys ? std::nullopt : std::optional<uint64_t>(step);
    if (!keys) {
      for (auto& w : step_waiters_) out.push_back([w, step] { w.set(step); });
      step_waiters_.clear();
    }
  }
  run(out);
  return keys;
}

bool client_channel::pulled(uint64_t token, uint64_t step, const parameter_view& params,
                            gradient_buffer& grad) {
  later out;
  bool have = false;
  {
    std::lock_guard<std::mutex> g(m_);
    if (token != token_ || closed_)
      return false;
    if (pull_ && pull_->step == step && pull_->taken) {
      delivered_ = std::make_shared<const pulled_step>(step, params);
      out.push_back([a = pull_->answer, p = delivered_] { a.set(p); });
      pull_.reset();
    }
    if (delivered_ && delivered_->step == step)
      holding_ = step;
    if (push_ && push_->step == step) {
      grad = push_->grad;
      have = true;
    }
  }
  run(out);
  return have;
}

bool client_channel::gradient(uint64_t token, uint64_t step, gradient_buffer& grad) {
  std::lock_guard<std::mutex> g(m_);
  if (token != token_ || closed_ || !push_ || push_->step != step)
    return false;
  grad = push_->grad;
  return true;
}

void client_channel::completed(uint64_t token, uint64_t steps_done) {
  later out;
  {
    std::lock_guard<std::mutex> g(m_);
    if (token != token_ || closed_)
      return;
    if (push_ && push_->step < steps_done)
      settle_push(steps_done, out);
    if (holding_ && *holding_ < steps_done)
      holding_.reset();
  }
  run(out);
}

void client_channel::finished(uint64_t token, uint64_t steps) {
  later out;
  {
    std::lock_guard<std::mutex> g(m_);
    if (token != token_ || closed_)
      return;
    finished_ = steps;
    ready_.reset();
    holding_.reset();
    settle_push(steps, out);
    if (push_) {  // a push of the step past the last one (none can be pulled)
      out.push_back([a = push_->answer, e = moved("push", push_->step, steps)] { a.set(e); });
      push_.reset();
    }
    if (pull_) {
      out.push_back([a = pull_->answer, e = past_the_end(pull_->step, steps)] { a.set(e); });
      pull_.reset();
    }
    for (auto& w : step_waiters_) out.push_back([w, steps] { w.set(steps); });
    step_waiters_.clear();
  }
  run(out);
}

bool client_channel::finished() {
  std::lock_guard<std::mutex> guard(m_);
  return finished_.has_value();
}

}  // namespace keel
