// The job's side of fault injection: the hooks the fault driver
// (actors/faults/fault_driver.hpp) calls to end an actor in the running tree
// (found through the tree's directory, waiting while it restarts, without
// blocking the controller), and the application's job::kill and job::inject.
#include <algorithm>

#include "actors/core/actor_id.hpp"
#include "actors/core/crash.hpp"
#include "actors/job/job_controller.hpp"
#include "actors/job/placement.hpp"
#include "messages/errors.hpp"
#include "supervision/protocol.hpp"

namespace keel {

namespace {

void end(controller_actor* self, const caf::actor& target, const std::string& name, fault_kind how) {
  switch (how) {
    case fault_kind::exit:
      self->send_exit(target, make_error(errc::invalid_argument, "injected crash of " + name));
      break;
    case fault_kind::raise:
      caf::anon_send(target, crash_atom::value);
      break;
    default:
      caf::anon_send_exit(target, caf::exit_reason::kill);
      break;
  }
}

// Carries out node faults with the application's callback, one at a time,
// in the order asked. Linked to the controller: it ends with it.
caf::behavior node_fault_runner(caf::event_based_actor*,
                                std::function<caf::error(uint32_t, fault_kind,
                                                         std::chrono::milliseconds)> carry_out) {
  // The fault kind crosses as its underlying integer (a plain message type).
  return {
    [=](uint32_t node, uint8_t how, int64_t away_ms) -> caf::result<caf::ok_atom> {
      if (auto err = carry_out(node, static_cast<fault_kind>(how), std::chrono::milliseconds(away_ms)))
        return err;
      return caf::ok_atom::value;
    },
  };
}

void node_fault_done(controller_actor* self, const std::function<void(caf::error)>& done,
                     caf::error err) {
  auto& readout = self->state.readout;
  if (readout.node_fault_marks.empty())
    return done(std::move(err));  // the run ended meanwhile
  // The fault's event goes where the events after its start begin.
  auto mark = std::min(readout.node_fault_marks.front(), readout.held.size());
  readout.node_fault_marks.pop_front();
  std::deque<readout_state::timed_event> after(std::make_move_iterator(readout.held.begin() + mark),
                                               std::make_move_iterator(readout.held.end()));
  readout.held.erase(readout.held.begin() + mark, readout.held.end());
  done(std::move(err));  // records the fault: appended, or held at `mark`
  auto inserted = readout.held.size() - mark;
  for (auto& m : readout.node_fault_marks) m += inserted;
  for (auto& e : after) readout.held.push_back(std::move(e));
  release_held(self);
  maybe_finish(self);  // the run's end waited for it
}

void deliver(caf::response_promise& rp, caf::error err) {
  if (err)
    rp.deliver(std::move(err));
  else
    rp.deliver(caf::ok_atom::value);
}

}  // namespace

// Finds the running actor `name` through the tree's directory (waiting
// while it restarts) and calls `act` with it, then `done`; `done` alone,
// with an error saying what `verb` could not do, when there is none.
void with_actor(controller_actor* self, const std::string& name, const std::string& verb,
                std::function<void(const caf::actor&)> act, std::function<void(caf::error)> done) {
  auto& run = self->state.run;
  auto cannot = [name, verb](const caf::error& why) {
    return make_error(errc::not_found, "cannot " + verb + " '" + name + "': " + describe(why));
  };
  if (!run.tree)
    return done(cannot(make_error(errc::not_found, "'" + name + "': the job is not running")));
  if (name == "root") {
    act(run.tree->root());
    return done({});
  }
  // The directory answers within five seconds; the extra one covers a
  // directory that died (its own timeout would otherwise race this one).
  self->request(run.tree->directory(), std::chrono::seconds(6), supervision::await_name_atom::value,
                name, uint64_t{1}, caf::timespan{std::chrono::seconds(5)})
    .then(
      [act, done](caf::actor& target) {
        act(target);
        done({});
      },
      [done, cannot](caf::error& err) { done(cannot(err)); });
}

void controller_hooks::end_actor(const std::string& name, fault_kind how,
                                 std::function<void(caf::error)> done) {
  auto me = self;
  with_actor(self, name, "kill", [me, name, how](const caf::actor& target) { end(me, target, name, how); },
             std::move(done));
}

void move_now(controller_actor* self, const std::string& name, const std::string& why,
              caf::response_promise rp) {
  auto id = parse_actor_id(name);
  if (!id || !(id->is(actor_kind::shard) || id->is(actor_kind::worker)))
    return rp.deliver(make_error(errc::invalid_argument, "only a shard or a worker moves, not '" + name + "'"));
  // The step a checkpoint must reach before the next move: what the
  // fastest worker may have pushed by now (0: no checkpoints to wait for).
  auto& steps = self->state.progress.worker_step;
  uint64_t settle = self->state.cfg.checkpoints.every == 0 || steps.empty()
                      ? 0
                      : *std::max_element(steps.begin(), steps.end()) + 1;
  auto me = self;
  with_actor(
    self, name, "move",
    [me, why](const caf::actor& target) { me->send_exit(target, make_error(errc::moved, why)); },
    [rp, settle](caf::error err) mutable {
      if (err)
        rp.deliver(std::move(err));
      else
        rp.deliver(settle);
    });
}

void controller_hooks::record(job_event e) {
  keel::record(self, std::move(e));
}

void controller_hooks::node_fault(uint32_t node, fault_kind how, std::chrono::milliseconds away,
                                  std::function<void(caf::error)> done) {
  auto& cfg = self->state.cfg;
  if (how == fault_kind::drain) {  // the placement's to carry out
    if (!cfg.placement)
      return done(make_error(errc::invalid_argument, "the job runs in one process: no node to drain"));
    return done(cfg.placement->drain(node));
  }
  if (!cfg.faults.node_faults)
    return fault_hooks::node_fault(node, how, away, std::move(done));
  // The application's callback may take a while (it signals a process, and
  // may start another): it runs on a thread of its own, and its answer comes
  // back as a message.
  auto& runner = self->state.node_fault_runner;
  if (!runner)
    runner = self->spawn<caf::detached + caf::linked>(node_fault_runner, cfg.faults.node_faults);
  self->request(runner, caf::infinite, node, static_cast<uint8_t>(how),
                static_cast<int64_t>(away.count()))
    .then([me = self, done](caf::ok_atom) { node_fault_done(me, done, {}); },
          [me = self, done](caf::error& err) { node_fault_done(me, done, err); });
  // What happens meanwhile (the node's loss) follows the fault's own event.
  auto& readout = self->state.readout;
  readout.node_fault_marks.push_back(readout.held.size());
}

void kill_now(controller_actor* self, const fault& f, caf::response_promise rp) {
  self->state.faults->end_actor(f.target, f.kind,
                                [rp](caf::error err) mutable { deliver(rp, std::move(err)); });
}

void inject_now(controller_actor* self, const fault& f, caf::response_promise rp) {
  auto& cfg = self->state.cfg;
  if (auto err = check_fault_plan({f}, cfg.training.shards, cfg.training.workers, cfg.placement ? cfg.placement->nodes() : 0))
    return deliver(rp, std::move(err));
  self->state.faults->inject(f, [rp](caf::error err) mutable { deliver(rp, std::move(err)); });
}

}  // namespace keel
