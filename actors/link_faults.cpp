#include "actors/link_faults.hpp"

#include <cstdlib>

#include "messages/errors.hpp"

namespace keel {

caf::error link_faults::arm(const fault& f) {
  armed a;
  switch (f.kind) {
    case fault_kind::drop: a.action = send_action::drop; break;
    case fault_kind::duplicate: a.action = send_action::duplicate; break;
    case fault_kind::delay: a.action = send_action::delay; break;
    default:
      return make_error(errc::invalid_argument, "'" + to_string(f) + "' is not a message fault");
  }
  // Target "worker:N" or "worker:N>shard:M" (parse_fault_plan checked the prefix).
  auto gt = f.target.find('>');
  auto worker = f.target.substr(7, gt == std::string::npos ? std::string::npos : gt - 7);
  char* end = nullptr;
  a.worker = static_cast<uint32_t>(std::strtoul(worker.c_str(), &end, 10));
  if (worker.empty() || *end != '\0')
    return make_error(errc::invalid_argument, "'" + f.target + "' names no worker");
  if (gt != std::string::npos) {
    auto shard = f.target.substr(gt + 1);
    if (shard.rfind("shard:", 0) != 0 || shard.size() == 6)
      return make_error(errc::invalid_argument, "'" + f.target + "' names no shard after '>'");
    a.shard = static_cast<uint32_t>(std::strtoul(shard.c_str() + 6, &end, 10));
    if (*end != '\0')
      return make_error(errc::invalid_argument, "'" + f.target + "' names no shard after '>'");
  }
  a.remaining = f.count;
  a.delay_ms = f.delay_ms;
  std::lock_guard<std::mutex> guard(mtx_);
  armed_.push_back(a);
  return {};
}

send_decision link_faults::on_send(uint32_t worker, uint32_t shard) {
  std::lock_guard<std::mutex> guard(mtx_);
  for (auto it = armed_.begin(); it != armed_.end(); ++it) {
    if (it->worker != worker || (it->shard && *it->shard != shard))
      continue;
    send_decision d{it->action, it->delay_ms};
    if (--it->remaining == 0)
      armed_.erase(it);
    return d;
  }
  return {};
}

size_t link_faults::pending() const {
  std::lock_guard<std::mutex> guard(mtx_);
  return armed_.size();
}

}  // namespace keel
