// The job's side of fault injection: the hooks the fault driver
// (actors/faults/fault_driver.hpp) calls to end an actor in the running
// tree, and the embedding calls job::kill and job::inject.
#include "actors/core/crash.hpp"
#include "actors/job/job_impl.hpp"
#include "actors/job/placement.hpp"

namespace keel {

caf::expected<caf::actor> job::impl::resolve(const std::string& name, caf::timespan timeout) {
  if (!tree)
    return make_error(errc::not_found, "'" + name + "': the job is not running");
  if (name == "root")
    return tree->root();
  return supervision::await_name(*sys, tree->directory(), name, 1, timeout);
}

caf::error job::impl::end_actor(const std::string& name, fault_kind how) {
  auto found = resolve(name, std::chrono::seconds(5));
  if (!found)
    return make_error(errc::not_found, "cannot kill '" + name + "': " + describe(found.error()));
  auto target = *found;
  switch (how) {
    case fault_kind::exit:
      (*ctl)->send_exit(target, make_error(errc::invalid_argument, "injected crash of " + name));
      break;
    case fault_kind::raise:
      caf::anon_send(target, crash_atom::value);
      break;
    default:
      caf::anon_send_exit(target, caf::exit_reason::kill);
      break;
  }
  return {};
}

caf::error job::impl::node_fault(uint32_t node, fault_kind how, std::chrono::milliseconds away) {
  if (!cfg.node_faults)
    return fault_hooks::node_fault(node, how, away);
  return cfg.node_faults(node, how, away);
}

caf::error job::kill(const std::string& name, kill_mode mode) {
  auto how = mode == kill_mode::exit    ? fault_kind::exit
             : mode == kill_mode::raise ? fault_kind::raise
                                        : fault_kind::kill;
  return impl_->faults->end_actor(name, how);
}

caf::error job::inject(const fault& f) {
  auto& j = *impl_;
  if (!j.tree)
    return make_error(errc::shutting_down, "the job is not running");
  if (auto err = check_fault_plan({f}, j.cfg.shards, j.cfg.workers,
                                  j.cfg.placement ? j.cfg.placement->nodes() : 0))
    return err;
  return j.faults->inject(f);
}

}  // namespace keel
