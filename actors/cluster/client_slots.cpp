#include "actors/cluster/client_slots.hpp"

#include "actors/core/actor_id.hpp"
#include "actors/core/client_channel.hpp"
#include "messages/errors.hpp"

namespace keel {

client_slots::client_slots(const std::vector<uint32_t>& workers) {
  for (auto w : workers)
    slots_[w].channel = std::make_shared<client_channel>(to_string(actor_id::worker(w)));
}

std::vector<uint32_t> client_slots::workers() const {
  std::vector<uint32_t> out;
  for (auto& [w, s] : slots_)
    out.push_back(w);
  return out;
}

std::shared_ptr<client_channel> client_slots::channel(uint32_t w) const {
  auto it = slots_.find(w);
  return it == slots_.end() ? nullptr : it->second.channel;
}

void client_slots::started(uint32_t w, std::shared_ptr<const model> m, uint64_t steps) {
  {
    std::lock_guard<std::mutex> guard(m_);
    auto it = slots_.find(w);
    if (it == slots_.end())
      return;
    it->second.training_model = std::move(m);
    it->second.steps = steps;
    ++it->second.running;
  }
  changed_.notify_all();
}

void client_slots::stopped(uint32_t w) {
  {
    std::lock_guard<std::mutex> guard(m_);
    auto it = slots_.find(w);
    if (it == slots_.end() || it->second.running == 0)
      return;
    --it->second.running;
  }
  changed_.notify_all();
}

bool client_slots::released(const slot& s) const {
  return s.training_model && s.running == 0 && s.channel->finished();
}

caf::error client_slots::wait_released(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(m_);
  auto all = [&] {
    for (auto& [w, s] : slots_)
      if (!released(s))
        return false;
    return true;
  };
  if (changed_.wait_for(lock, timeout, all))
    return {};
  std::string left;
  for (auto& [w, s] : slots_)
    if (!released(s))
      left += (left.empty() ? "" : ", ") + to_string(actor_id::worker(w)) +
              (!s.training_model ? " (never started here)"
               : s.running > 0   ? (s.channel->finished() ? " (done, kept until the job ends)" : " (running)")
                                 : " (down, waiting for its restart)");
  return make_error(errc::timeout, "the job has not let " + left + " go within " + std::to_string(timeout.count()) +
                                     " ms");
}

bool client_slots::any_running() const {
  std::lock_guard<std::mutex> guard(m_);
  for (auto& [w, s] : slots_)
    if (s.running > 0)
      return true;
  return false;
}

caf::expected<client_slots::job_of_worker> client_slots::wait_started(uint32_t w,
                                                                       std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(m_);
  auto it = slots_.find(w);
  if (it == slots_.end()) {
    std::string mine;
    for (auto& [k, s] : slots_)
      mine += (mine.empty() ? "" : ", ") + to_string(actor_id::worker(k));
    return make_error(errc::not_found, to_string(actor_id::worker(w)) + ": this process runs the loops of " +
                                         (mine.empty() ? std::string("no worker") : mine) + " only");
  }
  auto& s = it->second;
  if (!changed_.wait_for(lock, timeout, [&] { return s.training_model != nullptr || closed_; }))
    return make_error(errc::timeout, to_string(actor_id::worker(w)) + ": the job's coordinator has not started it "
                                       "in this process within " + std::to_string(timeout.count()) +
                                       " ms (is keel cluster running with --application-loop, and does "
                                       "this process join one of its nodes?)");
  if (!s.training_model)
    return closed_;
  return job_of_worker{s.training_model, s.steps};
}

void client_slots::close(const caf::error& why) {
  std::vector<std::shared_ptr<client_channel>> channels;
  {
    std::lock_guard<std::mutex> guard(m_);
    closed_ = why;
    for (auto& [w, s] : slots_)
      channels.push_back(s.channel);
  }
  changed_.notify_all();
  for (auto& c : channels)
    c->close(why);
}

}  // namespace keel
