// A child can fail while being started: in its start function (an error or
// an exception) or while its actor initialises.
#include <atomic>

#include "support.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

namespace {

// Starts a worker, except on the attempts listed in `fail_on` (1-based,
// counted over every call), where it throws.
child_spec flaky(const std::string& id, std::shared_ptr<std::atomic<int>> calls,
                 std::vector<int> fail_on) {
  auto c = worker_spec(id);
  auto start = c.start;
  c.start = [=](caf::actor_system& sys, const restart_context& ctx) -> caf::expected<caf::actor> {
    int n = ++*calls;
    if (std::find(fail_on.begin(), fail_on.end(), n) != fail_on.end())
      throw std::runtime_error("start attempt " + std::to_string(n) + " refused");
    return start(sys, ctx);
  };
  return c;
}

}  // namespace

TEST_CASE("a restart whose start function throws counts as a failure and is retried") {
  fixture f;
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto t = f.start(sup_spec("root", strategy::one_for_one, {flaky("a", calls, {2})}, 5));
  f.crash("a");
  f.expect(event_kind::down, "a");
  auto failed = f.expect(event_kind::down, "a");  // the failed start
  CHECK(is(failed.reason, errc::start_failed));
  CHECK(describe(failed.reason).find("start attempt 2 refused") != std::string::npos);
  CHECK(failed.will_restart);
  auto r = f.expect(event_kind::restart, "a");
  CHECK(r.incarnation == 2);  // a failed attempt does not use up an incarnation
  CHECK(*calls == 3);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a start function that keeps failing exhausts the intensity and escalates") {
  fixture f;
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto t = f.start(sup_spec("root", strategy::one_for_one,
                            {worker_spec("a"), flaky("b", calls, {2, 3, 4, 5, 6})}, 3));
  f.crash("b");
  auto why = t.await(wait_budget);
  REQUIRE(is(why, errc::escalated));
  CHECK(describe(why).find("child 'b'") != std::string::npos);
  CHECK(describe(why).find("refused") != std::string::npos);
  CHECK(f.expect(event_kind::shutdown, "a").reason == caf::exit_reason::user_shutdown);
}

TEST_CASE("a child that fails to start while its supervisor starts fails the tree's start, "
          "naming it, after stopping the children already started") {
  fixture f;
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto t = tree::start(f.sys,
                       sup_spec("root", strategy::one_for_one,
                                {worker_spec("a"), flaky("b", calls, {1}), worker_spec("c")}),
                       f.options());
  REQUIRE_FALSE(t);
  CHECK(is(t.error(), errc::start_failed));
  CHECK(describe(t.error()).find("child 'b'") != std::string::npos);
  CHECK(f.expect(event_kind::shutdown, "a").incarnation == 1);
  for (const auto& e : f.seen)
    CHECK(e.child != "c");
}

TEST_CASE("a child that crashes while initialising is restarted like any crash") {
  fixture f;
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto c = worker_spec("a");
  c.start = [calls](caf::actor_system& sys, const restart_context& ctx) -> caf::expected<caf::actor> {
    worker_options o;
    o.crash_on_init = ++*calls == 1;
    return sys.spawn(worker, ctx, o);
  };
  auto t = f.start(sup_spec("root", strategy::one_for_one, {c}, 5));
  auto down = f.expect(event_kind::down, "a");
  CHECK(down.incarnation == 1);
  CHECK(down.reason == caf::sec::runtime_error);
  CHECK(f.expect(event_kind::restart, "a").incarnation == 2);
  CHECK(std::get<1>(f.who(f.handle_of("a"))) == 2);
  CHECK_FALSE(t.shutdown(wait_budget));
}
