// Restarting from the last snapshot: offered by the child, or from the
// spec's source; damaged ones are skipped; none means a fresh start.
#include "support.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

namespace {

child_spec keeper_spec(const std::string& id) {
  return worker_spec(id);
}

// Rejects any snapshot whose value is negative, as a checksum would.
caf::error reject_negative(const snapshot& s) {
  auto v = s.as<int>();
  if (!v || *v < 0)
    return make_error(errc::damaged_snapshot, "checksum mismatch");
  return {};
}

void offer(fixture& f, const std::string& label, int value) {
  f.self->request(f.handle_of("k"), wait_budget, offer_atom::value, label, value)
    .receive([](caf::ok_atom) {}, [](caf::error& e) { FAIL(caf::to_string(e)); });
}

}  // namespace

TEST_CASE("a restarted child receives the newest snapshot it offered") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {keeper_spec("k")}));
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == -1);
  offer(f, "s1", 41);
  offer(f, "s2", 42);
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
  auto spec = keeper_spec("k");
  spec.validate = reject_negative;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {spec}));
  offer(f, "good", 7);
  offer(f, "damaged", -1);
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
  auto spec = keeper_spec("k");
  spec.validate = reject_negative;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {spec}));
  f.crash("k");
  auto r = f.expect(event_kind::restart, "k");
  CHECK_FALSE(r.from_snapshot);
  CHECK(to_string(r).find("fresh") != std::string::npos);
  offer(f, "bad", -5);
  f.crash("k");
  r = f.expect(event_kind::restart, "k");
  CHECK_FALSE(r.from_snapshot);
  CHECK(r.snapshots_rejected.size() == 1);
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == -1);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a spec's snapshot source supplies candidates after the offered ones") {
  fixture f;
  auto spec = keeper_spec("k");
  spec.validate = reject_negative;
  spec.snapshots = [](const std::string& id) {
    CHECK(id == "k");
    return std::vector<snapshot>{snapshot::of("disk-2", std::make_shared<const int>(-2)),
                                 snapshot::of("disk-1", std::make_shared<const int>(100))};
  };
  auto t = f.start(sup_spec("root", strategy::one_for_one, {spec}));
  // Even the first incarnation starts from the source's newest valid one.
  auto s = f.expect(event_kind::start, "k");
  CHECK(s.snapshot_label == "disk-1");
  offer(f, "mem", 5);
  f.crash("k");
  CHECK(f.expect(event_kind::restart, "k").snapshot_label == "mem");
  CHECK(std::get<2>(f.who(f.handle_of("k"))) == 5);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a supervisor remembers only the newest snapshots_kept offers") {
  fixture f;
  auto spec = keeper_spec("k");
  spec.validate = reject_negative;
  spec.snapshots_kept = 2;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {spec}));
  offer(f, "old", 1);
  offer(f, "mid", -1);
  offer(f, "new", -1);
  f.crash("k");
  auto r = f.expect(event_kind::restart, "k");
  CHECK_FALSE(r.from_snapshot);  // "old" was dropped; both kept ones are damaged
  CHECK(r.snapshots_rejected.size() == 2);
  CHECK_FALSE(t.shutdown(wait_budget));
}
