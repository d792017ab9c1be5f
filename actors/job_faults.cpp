// Fault injection inside the job: kills by name, and the fault plan's
// triggers (steps, times, message counts) firing into the running tree.
// Message faults are armed on the job's link_faults, storage faults on its
// faulty_io; see actors/faults/fault_plan.hpp for the plan and its text form.
#include <cerrno>
#include <filesystem>

#include "actors/job_impl.hpp"
#include "storage/file_damage.hpp"

namespace keel {

caf::expected<caf::actor> job::impl::resolve(const std::string& name, caf::timespan timeout) {
  if (!tree)
    return make_error(errc::not_found, "'" + name + "': the job is not running");
  if (name == "root")
    return tree->root();
  return supervision::await_name(*sys, tree->directory(), name, 1, timeout);
}

namespace {

job_event kill_event(const std::string& name, const char* kind, std::string detail) {
  auto e = make_job_event(event_kind::fault, name, std::move(detail));
  e.fault = std::string(kind) + ":" + name;
  e.killed = true;
  return e;
}

}  // namespace

caf::error job::kill(const std::string& name, kill_mode mode) {
  auto& j = *impl_;
  auto found = j.resolve(name, std::chrono::seconds(5));
  if (!found)
    return make_error(errc::not_found, "cannot kill '" + name + "': " + describe(found.error()));
  auto target = *found;
  switch (mode) {
    case kill_mode::kill:
      j.record(kill_event(name, "kill", "killed (exit_reason::kill)"));
      caf::anon_send_exit(target, caf::exit_reason::kill);
      break;
    case kill_mode::exit:
      j.record(kill_event(name, "exit", "killed (quit with an error)"));
      (*j.ctl)->send_exit(target, make_error(errc::invalid_argument, "injected crash of " + name));
      break;
    case kill_mode::raise:
      j.record(kill_event(name, "throw", "killed (exception thrown in a handler)"));
      caf::anon_send(target, crash_atom::value);
      break;
  }
  return {};
}

caf::error job::inject(const fault& f) {
  auto& j = *impl_;
  if (!j.tree)
    return make_error(errc::shutting_down, "the job is not running");
  if (auto err = check_fault_plan({f}, j.cfg.shards, j.cfg.workers))
    return err;
  return inject_fault(j, *this, f);
}

namespace {

// Flips one bit in the middle of the newest snapshot file on disk: a later
// restore from disk must notice and fall back to the checkpoint before.
caf::error flip_newest_snapshot(job::impl& j, const fault& f) {
  std::filesystem::path newest;
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator(j.cfg.checkpoint_dir, ec))
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
  j.record(std::move(e));
  return flip_bit(newest, size / 2, static_cast<unsigned>(f.at_step % 8));
}

}  // namespace

// Injects one fault now; the event names it as the plan spells it.
caf::error inject_fault(job::impl& j, job& owner, const fault& f) {
  caf::error err;
  switch (f.kind) {
    case fault_kind::kill:
      err = owner.kill(f.target, job::kill_mode::kill);
      break;
    case fault_kind::exit:
      err = owner.kill(f.target, job::kill_mode::exit);
      break;
    case fault_kind::raise:
      err = owner.kill(f.target, job::kill_mode::raise);
      break;
    case fault_kind::flip:
      err = flip_newest_snapshot(j, f);
      break;
    case fault_kind::drop:
    case fault_kind::duplicate:
    case fault_kind::delay:
    case fault_kind::reorder:
      err = j.links->arm(f);
      break;
    case fault_kind::enospc:
    case fault_kind::eio:
      j.disk->arm(io_fault{f.target == "write" ? io_op::write : io_op::fsync, 1,
                           f.kind == fault_kind::enospc ? ENOSPC : EIO});
      break;
    case fault_kind::tear:
      j.disk->arm(io_tear{1, 16, true});
      break;
  }
  j.result.fault_plan += (j.result.fault_plan.empty() ? "" : ",") + to_string(f);
  bool kill = f.kind == fault_kind::kill || f.kind == fault_kind::exit || f.kind == fault_kind::raise;
  if (!kill || err) {
    auto e = make_job_event(event_kind::fault, f.target,
                            kill ? "not killed: " + describe(err)
                                 : to_string(f) + (err ? ": not injected: " + describe(err) : ""));
    e.fault = to_string(f);
    e.step = f.at_step;
    j.record(std::move(e));
  }
  return err;
}

// Injects every fault whose step or time has come, in plan order.
void fire_due_faults(job::impl& j, job& owner) {
  auto slowest = *std::min_element(j.worker_step.begin(), j.worker_step.end());
  auto now = static_cast<uint64_t>(j.elapsed_ms());
  for (size_t i = 0; i < j.plan.size(); ++i) {
    auto& f = j.plan[i];
    bool due = (f.when == trigger::step && f.at_step <= slowest) ||
               (f.when == trigger::time && f.at_step <= now) || j.counted[i];
    // A second kill of the same actor waits for it to be back: two kills
    // in a plan are two crashes, not one incarnation killed twice.
    if (due && !j.fired[i] && !(f.is_kill() && j.not_back.count(f.target))) {
      j.fired[i] = true;
      if (!inject_fault(j, owner, f) && f.is_kill())
        j.not_back.insert(f.target);
    }
  }
}

// How long until the next timed fault or window check is due (`cap` if none is).
std::chrono::milliseconds until_next_timed(const job::impl& j, std::chrono::milliseconds cap) {
  if (j.stalled_since) {
    auto due = *j.stalled_since + j.cfg.checkpoint_timeout - std::chrono::steady_clock::now();
    cap = std::min(cap, std::max(std::chrono::milliseconds(0),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(due) +
                                   std::chrono::milliseconds(1)));
  }
  auto now = j.elapsed_ms();
  for (size_t i = 0; i < j.plan.size(); ++i)
    if (j.plan[i].when == trigger::time && !j.fired[i])
      cap = std::min(cap, std::chrono::milliseconds(
                            std::max<int64_t>(0, static_cast<int64_t>(j.plan[i].at_step) - now)));
  return cap;
}

}  // namespace keel
