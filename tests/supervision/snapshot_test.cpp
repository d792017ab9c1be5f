// Restarting from the last snapshot: candidates come from the spec's
// snapshot source, newest first; damaged ones are skipped; none means a
// fresh start.
#include <mutex>

#include "support.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

namespace {

// Rejects any snapshot whose value is negative, as a checksum would.
caf::error reject_negative(const snapshot& s) {
  auto v = s.as<int>();
  if (!v || *v < 0)
    return make_error(errc::damaged_snapshot, "checksum mismatch");
  return {};
}

// What a store on disk would hold: the test sets the candidates, the
// supervisor reads them (on its own thread) at each start.
struct candidates {
  std::mutex mtx;
  std::vector<snapshot> newest_first;

  void set(std::vector<std::pair<std::string, int>> labelled) {
    std::vector<snapshot> next;
    for (auto& [label, value] : labelled)
      next.push_back(snapshot::of(label, std::make_shared<const int>(value)));
    std::lock_guard<std::mutex> guard(mtx);
    newest_first = std::move(next);
  }
};

child_spec keeper_spec(const std::string& id, std::shared_ptr<candidates> from) {
  auto spec = worker_spec(id);
  spec.snapshots = [from](const std::string& child) {
    CHECK(child == "k");
    std::lock_guard<std::mutex> guard(from->mtx);
    return from->newest_first;
  };
  return spec;
}

}  // namespace

TEST_CASE("a restarted child receives the newest snapshot its spec's source supplies") {
  fixture f;
  auto store = std::make_shared<candidates>();
  auto t = f.start(sup_spec("root", strategy::one_for_one, {keeper_spec("k", store)}));
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == -1);
  store->set({{"s2", 42}, {"s1", 41}});
  f.crash("k");
  auto r = f.expect(event_kind::restart, "k");
  CHECK(r.from_snapshot);
  CHECK(r.snapshot_label == "s2");
  CHECK(r.snapshots_rejected.empty());
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == 42);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a damaged snapshot is skipped for the one before it") {
  fixture f;
  auto store = std::make_shared<candidates>();
  auto spec = keeper_spec("k", store);
  spec.validate = reject_negative;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {spec}));
  store->set({{"damaged", -1}, {"good", 7}});
  f.crash("k");
  auto r = f.expect(event_kind::restart, "k");
  CHECK(r.snapshot_label == "good");
  REQUIRE(r.snapshots_rejected.size() == 1);
  CHECK(r.snapshots_rejected[0] == "damaged: damaged_snapshot: checksum mismatch");
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == 7);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("with no snapshot, or none valid, the child starts fresh and the event says so") {
  fixture f;
  auto store = std::make_shared<candidates>();
  auto spec = keeper_spec("k", store);
  spec.validate = reject_negative;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {spec}));
  f.crash("k");
  auto r = f.expect(event_kind::restart, "k");
  CHECK_FALSE(r.from_snapshot);
  CHECK(to_string(r).find("fresh") != std::string::npos);
  store->set({{"bad", -5}});
  f.crash("k");
  r = f.expect(event_kind::restart, "k");
  CHECK_FALSE(r.from_snapshot);
  CHECK(r.snapshots_rejected.size() == 1);
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == -1);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a spec's snapshot source is asked at every start, the first one included") {
  fixture f;
  auto store = std::make_shared<candidates>();
  store->set({{"disk-2", -2}, {"disk-1", 100}});
  auto spec = keeper_spec("k", store);
  spec.validate = reject_negative;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {spec}));
  // Even the first incarnation starts from the source's newest valid one.
  auto s = f.expect(event_kind::start, "k");
  CHECK(s.snapshot_label == "disk-1");
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == 100);
  store->set({{"disk-3", 5}, {"disk-2", -2}, {"disk-1", 100}});
  f.crash("k");
  CHECK(f.expect(event_kind::restart, "k").snapshot_label == "disk-3");
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == 5);
  CHECK_FALSE(t.shutdown(wait_budget));
}
