// The job controller's lifecycle as a plain value (controller_core.hpp):
// which phase follows each event and what the controller does, tested
// without an actor system.
#include <doctest/doctest.h>

#include "actors/job/controller_core.hpp"

using namespace keel;
using act = controller_action;

namespace {

controller_core running() {
  controller_core c;
  c.launched();
  c.up();
  return c;
}

}  // namespace

TEST_CASE("a job begins once: a second begin is refused") {
  controller_core c;
  CHECK(c.begin(false) == act::launch);
  CHECK(c.begin(true) == act::refuse);
  c.launched();
  c.up();
  CHECK(c.begin(false) == act::refuse);
}

TEST_CASE("requests wait while a tree starts or rolls back, are served while it runs and refused once the job has ended") {
  controller_core c;
  CHECK(c.phase() == run_phase::starting);
  CHECK(c.request() == act::hold);
  CHECK(c.kill() == act::hold);
  c.up();
  CHECK(c.request() == act::serve);
  CHECK(c.kill() == act::serve);
  c.rolling_back();
  CHECK(c.request() == act::hold);
  c.launched();
  c.up();
  c.finishing();
  CHECK(c.request() == act::refuse);
  CHECK(c.kill() == act::serve);  // kill reports itself what it finds
  c.end();
  CHECK(c.request() == act::refuse);
}

TEST_CASE("only the tree launched last, answering while the run starts, is followed") {
  controller_core c;
  c.launched();
  CHECK(c.tree_answered(true) == act::follow_tree);
  CHECK(c.tree_answered(false) == act::none);
  c.up();
  CHECK(c.tree_answered(true) == act::none);
}

TEST_CASE("workers' reports count while a tree starts or runs, and only those of the current epoch") {
  controller_core c;
  CHECK(c.takes_report(0));
  c.up();
  CHECK(c.takes_report(0));
  CHECK_FALSE(c.takes_report(1));
  c.rolling_back();
  CHECK(c.epoch() == 1);
  CHECK_FALSE(c.takes_report(0));
  CHECK_FALSE(c.takes_report(1));  // nothing counts while the old tree goes down
  c.launched();
  CHECK(c.takes_report(1));
  CHECK_FALSE(c.takes_report(0));  // the old tree's reports are stale
}

TEST_CASE("a read of the parameters counts only if no rollback overtook it and the run still runs") {
  auto c = running();
  CHECK(c.read_counts(0));
  c.rolling_back();
  c.launched();
  c.up();
  CHECK_FALSE(c.read_counts(0));
  CHECK(c.read_counts(1));
  c.finishing();
  CHECK_FALSE(c.read_counts(1));
}

TEST_CASE("the root going down fails a start, escalates or rolls back a running tree, and means nothing once stopping") {
  controller_core c;
  CHECK(c.root_down(false) == act::fail);
  c.up();
  CHECK(c.root_down(true) == act::escalate);
  CHECK(c.root_down(false) == act::roll_back);
  CHECK(c.stop() == act::stop_tree);
  CHECK(c.root_down(false) == act::none);
  c.end();
  CHECK(c.root_down(true) == act::none);
}

TEST_CASE("a worker's rollback request rolls back only the running tree of its own epoch") {
  controller_core c;
  CHECK(c.rollback_requested(0) == act::hold);
  c.up();
  CHECK(c.rollback_requested(1) == act::none);
  CHECK(c.rollback_requested(0) == act::roll_back);
  c.rolling_back();
  CHECK(c.rollback_requested(1) == act::hold);
  c.launched();
  c.up();
  CHECK(c.rollback_requested(0) == act::none);  // from the tree rolled back
  CHECK(c.rollback_requested(1) == act::roll_back);
}

TEST_CASE("a stop ends a running tree, joins a run that finishes or stops, waits for a restart and is refused after the end") {
  controller_core c;
  CHECK(c.stop() == act::hold);
  c.up();
  CHECK(c.stop() == act::stop_tree);
  CHECK(c.phase() == run_phase::stopping);
  CHECK(c.stop() == act::join_stop);
  auto e = c.end();
  CHECK(e.first);
  CHECK(e.stopped);
  CHECK(c.stop() == act::refuse);
  auto f = running();
  f.finishing();
  CHECK(f.stop() == act::join_stop);
  CHECK(f.phase() == run_phase::finishing);
}

TEST_CASE("a run ends once, and says whether a stop ended it") {
  auto c = running();
  auto e = c.end();
  CHECK(e.first);
  CHECK_FALSE(e.stopped);
  CHECK(c.ended());
  auto again = c.end();
  CHECK_FALSE(again.first);
}

TEST_CASE("a lost worker may leave while the run starts, runs or rolls back, not once it finishes") {
  controller_core c;
  CHECK(c.worker_lost() == act::serve);
  c.up();
  CHECK(c.worker_lost() == act::serve);
  c.rolling_back();
  CHECK(c.worker_lost() == act::serve);
  c.launched();
  c.up();
  c.finishing();
  CHECK(c.worker_lost() == act::refuse);
}
