#include "actors/faults/fault_driver.hpp"

#include <algorithm>
#include <cerrno>

#include "actors/core/actor_id.hpp"
#include "actors/faults/link_faults.hpp"
#include "messages/errors.hpp"
#include "storage/faulty_io.hpp"
#include "storage/file_damage.hpp"

namespace keel {

namespace {

const char* how_text(fault_kind how) {
  switch (how) {
    case fault_kind::exit: return "killed (quit with an error)";
    case fault_kind::raise: return "killed (exception thrown in a handler)";
    default: return "killed (exit_reason::kill)";
  }
}

}  // namespace

void fault_hooks::node_fault(uint32_t node, fault_kind, std::chrono::milliseconds,
                             std::function<void(caf::error)> done) {
  done(make_error(errc::invalid_argument, "node:" + std::to_string(node) +
                                            ": this job runs in one process, with no node "
                                            "processes to fault"));
}

fault_driver::fault_driver(std::vector<fault> plan, std::filesystem::path checkpoint_dir,
                           fault_hooks& hooks, std::function<void(size_t)> on_count)
    : plan_(std::move(plan)),
      dir_(std::move(checkpoint_dir)),
      hooks_(hooks),
      links_(std::make_shared<link_faults>()),
      disk_(faulty_io::wrap()),
      fired_(plan_.size(), false),
      counted_(plan_.size(), false) {
  for (size_t i = 0; i < plan_.size(); ++i)
    if (plan_[i].when == trigger::messages)
      links_->at_count(plan_[i].of, plan_[i].at_step, [on_count, i] { on_count(i); });
}

void fault_driver::end_actor(const std::string& name, fault_kind how, outcome_fn done) {
  hooks_.end_actor(name, how, [this, name, how, done = std::move(done)](caf::error err) {
    if (!err) {
      auto e = make_job_event(event_kind::fault, name, how_text(how));
      e.fault = std::string(to_string(how)) + ":" + name;  // the kill itself has no trigger
      e.how = how;
      e.killed = true;
      hooks_.record(std::move(e));
    }
    if (done)
      done(std::move(err));
  });
}

// Flips one bit in the middle of the newest snapshot file on disk: a later
// restore from disk must notice and fall back to the checkpoint before.
caf::error fault_driver::flip_newest_snapshot(const fault& f) {
  std::filesystem::path newest;
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator(dir_, ec))
    if (entry.path().extension() == ".snap" && entry.path().filename() > newest.filename())
      newest = entry.path();
  if (newest.empty())
    return make_error(errc::not_found, "no stored snapshot to damage yet");
  auto size = std::filesystem::file_size(newest, ec);
  if (ec || size == 0)
    return make_error(errc::io_error, newest.string() + ": " + ec.message());
  auto e = make_job_event(event_kind::damage, newest.filename().string(),
                          to_string(f) + ": flipped a bit at byte " + std::to_string(size / 2));
  e.fault = to_string(f);
  e.how = f.kind;
  hooks_.record(std::move(e));
  return flip_bit(newest, size / 2, static_cast<unsigned>(f.at_step % 8));
}

void fault_driver::inject(const fault& f, outcome_fn done) {
  auto injected = [this, f, done = std::move(done)](caf::error err) {
    record_injection(f, err);
    if (done)
      done(std::move(err));
  };
  if (f.is_kill())
    return end_actor(f.target, f.kind, std::move(injected));
  if (f.is_node_fault()) {
    // check_fault_plan let only node:N through to here.
    if (auto node = parse_actor_id(f.target); node && node->is(actor_kind::node))
      return hooks_.node_fault(node->index, f.kind, std::chrono::milliseconds(f.delay_ms),
                               std::move(injected));
    return injected(make_error(errc::invalid_argument, "'" + f.target + "' names no node"));
  }
  injected(inject_now(f));
}

caf::error fault_driver::inject_now(const fault& f) {
  switch (f.kind) {
    case fault_kind::kill:
    case fault_kind::exit:
    case fault_kind::raise:
    case fault_kind::kill9:
    case fault_kind::crash:
    case fault_kind::stop:
    case fault_kind::cut:
    case fault_kind::partition:
    case fault_kind::split:
    case fault_kind::oneway:
    case fault_kind::drain:
    case fault_kind::join:
      break;  // inject() asks the runtime
    case fault_kind::flip:
      return flip_newest_snapshot(f);
    case fault_kind::drop:
    case fault_kind::duplicate:
    case fault_kind::delay:
    case fault_kind::reorder:
      return links_->arm(f);
    case fault_kind::enospc:
    case fault_kind::eio:
      // xCOUNT: that many operations in a row; +MSms: every one for that long.
      disk_->arm(io_fault{f.target == "write" ? io_op::write : io_op::fsync, 1,
                          f.kind == fault_kind::enospc ? ENOSPC : EIO, f.count,
                          std::chrono::milliseconds(f.delay_ms)});
      break;
    case fault_kind::tear:
      disk_->arm(io_tear{1, 16, true});
      break;
  }
  return {};
}

namespace {

// What a node fault did, for its event.
std::string node_fault_text(fault_kind k) {
  switch (k) {
    case fault_kind::kill9: return "the node's process killed with SIGKILL";
    case fault_kind::crash:
      return "the node's process armed to kill itself with SIGKILL in the middle of its next checkpoint file write";
    case fault_kind::stop: return "the node's process stopped with SIGSTOP";
    case fault_kind::partition: return "the node cut off from every peer, to heal later";
    case fault_kind::split: return "the node cut off from the coordinator, to heal later";
    case fault_kind::oneway: return "what the node sends dropped, to heal later";
    case fault_kind::drain: return "its shards and workers move to the other nodes, then it is released";
    case fault_kind::join: return "the node joins the job, which moves shards and workers to it";
    default: return "the node's process stopped, to continue later";
  }
}

}  // namespace

void fault_driver::record_injection(const fault& f, const caf::error& err) {
  injected_ += (injected_.empty() ? "" : ",") + to_string(f);
  if (f.is_membership()) {
    auto e = make_job_event(event_kind::membership, f.target,
                            err ? "not carried out: " + describe(err) : to_string(f) + ": " + node_fault_text(f.kind));
    e.fault = to_string(f);
    e.how = f.kind;
    e.failed = static_cast<bool>(err);
    e.step = f.at_step;
    hooks_.record(std::move(e));
  } else if (f.is_node_fault()) {
    auto e = make_job_event(event_kind::fault, f.target,
                            err ? "not injected: " + describe(err) : to_string(f) + ": " + node_fault_text(f.kind));
    e.fault = to_string(f);
    e.how = f.kind;
    e.killed = !err;
    e.step = f.at_step;
    hooks_.record(std::move(e));
  } else if (!f.is_kill() || err) {
    auto e = make_job_event(event_kind::fault, f.target,
                            f.is_kill() ? "not killed: " + describe(err)
                                        : to_string(f) + (err ? ": not injected: " + describe(err) : ""));
    e.fault = to_string(f);
    e.how = f.kind;
    e.step = f.at_step;
    hooks_.record(std::move(e));
  }
}

void fault_driver::skip_through(uint64_t step) {
  for (size_t i = 0; i < plan_.size(); ++i)
    if (plan_[i].when == trigger::step && plan_[i].at_step <= step)
      fired_[i] = true;
}

void fault_driver::count_reached(size_t i) {
  if (i < counted_.size())
    counted_[i] = true;
}

void fault_driver::fire_due(uint64_t slowest_step, int64_t now_ms) {
  auto now = static_cast<uint64_t>(std::max<int64_t>(now_ms, 0));
  for (size_t i = 0; i < plan_.size(); ++i) {
    auto& f = plan_[i];
    bool due = (f.when == trigger::step && f.at_step <= slowest_step) ||
               (f.when == trigger::time && f.at_step <= now) || counted_[i];
    if (due && !fired_[i] && !(f.is_kill() && not_back_.count(f.target))) {
      fired_[i] = true;
      if (f.is_kill())
        not_back_.insert(f.target);
      inject(f, [this, i](caf::error err) {
        auto& f = plan_[i];
        if (!err) {
          ++planned_injected_;
          return;
        }
        failed_.push_back(to_string(f) + ": " + describe(err));
        if (f.is_kill())
          not_back_.erase(f.target);
      });
    }
  }
}

std::vector<std::string> fault_driver::close_run() {
  std::vector<std::string> out = failed_;
  for (size_t i = 0; i < plan_.size(); ++i) {
    if (fired_[i])
      continue;
    auto& f = plan_[i];
    std::string why;
    if (f.is_kill() && not_back_.count(f.target))
      why = "the run ended while " + f.target + " was not back from an earlier kill";
    else if (f.when == trigger::step)
      why = "the run ended before every worker completed step " + std::to_string(f.at_step);
    else if (f.when == trigger::time)
      why = "the run ended before " + std::to_string(f.at_step) + " ms";
    else
      why = "the run ended before the " + std::to_string(f.at_step) + "th " + to_string(f.of) +
            " message";
    auto e = make_job_event(event_kind::fault, f.target, "not injected: " + why);
    e.fault = to_string(f);
    e.how = f.kind;
    e.step = f.at_step;
    hooks_.record(std::move(e));
    out.push_back(to_string(f) + ": " + why);
  }
  return out;
}

std::chrono::milliseconds fault_driver::until_next(std::chrono::milliseconds cap,
                                                   int64_t now_ms) const {
  for (size_t i = 0; i < plan_.size(); ++i)
    if (plan_[i].when == trigger::time && !fired_[i])
      cap = std::min(cap, std::chrono::milliseconds(
                            std::max<int64_t>(0, static_cast<int64_t>(plan_[i].at_step) - now_ms)));
  return cap;
}

}  // namespace keel
