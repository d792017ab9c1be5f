// Backoff on the injectable clock: restart delays are exact, observable and
// need no sleeping.
#include <limits>

#include "support.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

namespace {

child_spec slow_worker(const std::string& id) {
  auto c = worker_spec(id);
  c.backoff.min_delay = 100ms;
  c.backoff.max_delay = 400ms;
  c.backoff.reset_after = 10s;
  return c;
}

}  // namespace

TEST_CASE("backoff delays each consecutive restart twice as long, up to the max") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {slow_worker("a")}, 100));
  const std::chrono::milliseconds expected[] = {100ms, 200ms, 400ms, 400ms};
  uint64_t inc = 1;
  for (auto d : expected) {
    f.crash("a");
    auto down = f.expect(event_kind::down, "a");
    REQUIRE(down.will_restart);
    CHECK(std::chrono::nanoseconds(down.restart_delay_ns) == d);
    // The restart timer is set before the event goes out.
    REQUIRE(f.clk->next_due_in() == std::chrono::nanoseconds(d));
    CHECK(lookup(f.sys, f.directory, "a")->state == name_state::restarting);
    f.clk->advance(d - 1ns);
    CHECK(f.clk->pending() == 1);  // not yet
    f.clk->advance(1ns);
    CHECK(f.expect(event_kind::restart, "a").incarnation == ++inc);
  }
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("backoff starts over once the child has run quietly for reset_after") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {slow_worker("a")}, 100));
  f.crash("a");
  f.expect(event_kind::down, "a");  // the timer is set before this event
  f.clk->advance(100ms);
  f.expect(event_kind::restart, "a");
  f.crash("a");
  CHECK(f.expect(event_kind::down, "a").restart_delay_ns == std::chrono::nanoseconds(200ms).count());
  f.clk->advance(200ms);
  f.expect(event_kind::restart, "a");
  f.clk->advance(10s);  // quiet period
  f.crash("a");
  CHECK(f.expect(event_kind::down, "a").restart_delay_ns == std::chrono::nanoseconds(100ms).count());
  f.clk->advance(100ms);
  f.expect(event_kind::restart, "a");
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("jittered backoff stays between d and d * (1 + random_factor) and repeats per seed") {
  auto run = [](uint64_t seed) {
    fixture f;
    auto c = slow_worker("a");
    c.backoff.random_factor = 0.5;
    auto spec = sup_spec("root", strategy::one_for_one, {c}, 100);
    spec.random_seed = seed;
    auto t = f.start(spec);
    std::vector<int64_t> delays;
    for (int i = 0; i < 3; ++i) {
      f.crash("a");
      auto d = f.expect(event_kind::down, "a").restart_delay_ns;
      auto base = std::chrono::nanoseconds(100ms * (1 << i)).count();
      CHECK(d >= base);
      CHECK(d < base + base / 2);
      delays.push_back(d);
      f.clk->advance(std::chrono::nanoseconds(d));
      f.expect(event_kind::restart, "a");
    }
    CHECK_FALSE(t.shutdown(wait_budget));
    return delays;
  };
  CHECK(run(7) == run(7));
}

TEST_CASE("doubled_delay doubles its first delay up to the cap, never past it and without overflow") {
  using std::chrono::nanoseconds;
  CHECK(doubled_delay(nanoseconds(3), nanoseconds(100), 0) == nanoseconds(3));
  CHECK(doubled_delay(nanoseconds(3), nanoseconds(100), 2) == nanoseconds(12));
  CHECK(doubled_delay(nanoseconds(3), nanoseconds(100), 6) == nanoseconds(100));     // 192 is past the cap
  CHECK(doubled_delay(nanoseconds(3), nanoseconds(100), 6, 2) == nanoseconds(12));  // at most 2 doublings
  CHECK(doubled_delay(nanoseconds(300), nanoseconds(100), 1) == nanoseconds(100));  // a cap below the first
  auto huge = nanoseconds(std::numeric_limits<int64_t>::max());
  CHECK(doubled_delay(nanoseconds(1), huge, UINT32_MAX) == huge);
  CHECK(doubled_delay(nanoseconds(0), huge, UINT32_MAX) == nanoseconds(0));
}
