// The controller's lifecycle rules (controller_core.hpp).
#include "actors/job/controller_core.hpp"

namespace keel {

const char* to_string(run_phase p) {
  switch (p) {
    case run_phase::starting: return "starting";
    case run_phase::running: return "running";
    case run_phase::rolling_back: return "rolling back";
    case run_phase::finishing: return "finishing";
    case run_phase::stopping: return "stopping";
    case run_phase::ended: return "ended";
  }
  return "?";
}

const char* to_string(controller_action a) {
  switch (a) {
    case controller_action::none: return "none";
    case controller_action::hold: return "hold";
    case controller_action::serve: return "serve";
    case controller_action::refuse: return "refuse";
    case controller_action::launch: return "launch";
    case controller_action::follow_tree: return "follow_tree";
    case controller_action::fail: return "fail";
    case controller_action::escalate: return "escalate";
    case controller_action::roll_back: return "roll_back";
    case controller_action::stop_tree: return "stop_tree";
    case controller_action::join_stop: return "join_stop";
  }
  return "?";
}

controller_action controller_core::begin(bool begun) const {
  if (begun || phase_ != run_phase::starting)
    return controller_action::refuse;
  return controller_action::launch;
}

controller_action controller_core::tree_answered(bool current) const {
  return phase_ == run_phase::starting && current ? controller_action::follow_tree : controller_action::none;
}

controller_action controller_core::root_down(bool escalated) const {
  switch (phase_) {
    case run_phase::starting: return controller_action::fail;
    case run_phase::running: return escalated ? controller_action::escalate : controller_action::roll_back;
    default: return controller_action::none;  // stopped on purpose
  }
}

controller_action controller_core::request() const {
  if (restarting())
    return controller_action::hold;
  return running() ? controller_action::serve : controller_action::refuse;
}

controller_action controller_core::stop() {
  switch (phase_) {
    case run_phase::starting:
    case run_phase::rolling_back: return controller_action::hold;
    case run_phase::running:
      phase_ = run_phase::stopping;
      return controller_action::stop_tree;
    case run_phase::stopping:
    case run_phase::finishing: return controller_action::join_stop;
    case run_phase::ended: return controller_action::refuse;
  }
  return controller_action::refuse;
}

controller_action controller_core::rollback_requested(uint32_t epoch) const {
  if (restarting())
    return controller_action::hold;
  return running() && epoch == epoch_ ? controller_action::roll_back : controller_action::none;
}

controller_action controller_core::worker_lost() const {
  bool live = restarting() || running();
  return live ? controller_action::serve : controller_action::refuse;
}

controller_core::ending controller_core::end() {
  if (phase_ == run_phase::ended)
    return {};
  ending e{true, phase_ == run_phase::stopping};
  phase_ = run_phase::ended;
  return e;
}

}  // namespace keel
