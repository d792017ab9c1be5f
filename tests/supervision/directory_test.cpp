// The directory: stable names to current handles, watched across restarts,
// and calls that neither vanish nor hang while a name restarts.
#include "support.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace keel::supervision::testing;

namespace {

child_spec slow_worker(const std::string& id, restart_type r = restart_type::permanent) {
  auto c = worker_spec(id, r);
  c.backoff.min_delay = 1s;
  return c;
}

directory_update next_update(fixture& f) {
  directory_update out;
  f.self->receive([&](directory_update& u) { out = std::move(u); },
                  caf::after(wait_budget) >> [] { FAIL("no directory update"); });
  return out;
}

// (id, incarnation) of whoever answered a who_atom call made through the
// directory, or the error.
caf::expected<std::pair<std::string, uint64_t>> call_who(fixture& f, const std::string& name,
                                                          caf::timespan budget) {
  caf::expected<std::pair<std::string, uint64_t>> out{caf::sec::request_timeout};
  f.self->request(f.directory, wait_budget, call_atom::value, name, budget,
                  caf::make_message(who_atom::value))
    .receive([&](std::string& id, uint64_t inc, int) { out = std::make_pair(id, inc); },
             [&](caf::error& e) { out = std::move(e); });
  return out;
}

}  // namespace

TEST_CASE("lookup gives the current incarnation's handle under the child's stable name") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {worker_spec("a")}));
  auto first = f.handle_of("a");
  f.crash("a");
  f.expect(event_kind::restart, "a");
  auto u = lookup(f.sys, f.directory, "a");
  REQUIRE(u);
  CHECK(u->incarnation == 2);
  CHECK(u->handle != first);
  CHECK(std::get<1>(f.who(u->handle)) == 2);
  CHECK(is(lookup(f.sys, f.directory, "nobody").error(), errc::not_found));
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a watcher is told the new handle after each restart and when the name is gone") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one,
                            {worker_spec("a"), slow_worker("w", restart_type::transient)}));
  f.self->send(f.directory, watch_atom::value, "w");
  auto u = next_update(f);
  CHECK(u.state == name_state::up);
  CHECK(u.incarnation == 1);
  for (uint64_t inc = 2; inc <= 3; ++inc) {
    f.crash("w");
    u = next_update(f);
    CHECK(u.state == name_state::restarting);
    CHECK(!u.handle);
    // The backoff timer is set before the watcher hears `restarting`, so
    // moving the clock on now starts the next incarnation.
    CHECK(f.clk->next_due_in().has_value());
    f.clk->advance(std::chrono::seconds(1 << (inc - 2)));
    u = next_update(f);
    CHECK(u.state == name_state::up);
    CHECK(u.incarnation == inc);
    CHECK(std::get<1>(f.who(u.handle)) == inc);
  }
  f.self->send(u.handle, quit_atom::value);  // transient, normal exit: gone for good
  u = next_update(f);
  CHECK(u.state == name_state::gone);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a call to a name that is restarting waits for the new incarnation") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {slow_worker("w")}));
  f.crash("w");
  f.expect(event_kind::down, "w");  // the directory already says restarting
  // Sent, not requested, so this thread can advance the clock while the
  // call waits; the reply arrives as an ordinary message.
  f.self->send(f.directory, call_atom::value, std::string{"w"}, caf::timespan{wait_budget},
               caf::make_message(who_atom::value));
  f.clk->advance(1s);  // the backoff ends: incarnation 2 starts
  bool answered = false;
  f.self->receive([&](std::string& id, uint64_t inc, int) { answered = id == "w" && inc == 2; },
                  caf::after(wait_budget) >> [] {});
  CHECK(answered);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a call to a name still restarting when its budget runs out gets a timeout naming it") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {slow_worker("w")}));
  f.crash("w");
  f.expect(event_kind::down, "w");
  auto r = call_who(f, "w", std::chrono::milliseconds(20));
  REQUIRE_FALSE(r);
  CHECK(is(r.error(), errc::timeout));
  CHECK(describe(r.error()).find("'w' still restarting") != std::string::npos);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a call sent while the old incarnation dies with it unread reaches the next one") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {worker_spec("w")}));
  // The crash is ahead of the call in the old incarnation's mailbox, so the
  // call is bounced unread and must be re-sent to incarnation 2.
  f.crash("w");
  auto r = call_who(f, "w", wait_budget);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(r->second == 2);
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("a call to a name that is gone or unknown fails at once with not_found") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one,
                            {worker_spec("a"), worker_spec("tmp", restart_type::temporary)}));
  f.crash("tmp");
  f.expect(event_kind::down, "tmp");
  auto r = call_who(f, "tmp", wait_budget);
  REQUIRE_FALSE(r);
  CHECK(is(r.error(), errc::not_found));
  auto a = call_who(f, "a", wait_budget);
  REQUIRE(a);
  CHECK(a->first == "a");
  CHECK_FALSE(t.shutdown(wait_budget));
}

TEST_CASE("await_name returns once the name is up at the wanted incarnation") {
  fixture f;
  auto t = f.start(sup_spec("root", strategy::one_for_one, {slow_worker("w")}));
  f.crash("w");
  f.expect(event_kind::down, "w");
  CHECK(is(await_name(f.sys, f.directory, "w", 2, std::chrono::milliseconds(10)).error(),
           errc::timeout));
  f.clk->advance(1s);
  auto h = await_name(f.sys, f.directory, "w", 2, wait_budget);
  REQUIRE(h);
  CHECK(std::get<1>(f.who(*h)) == 2);
  CHECK_FALSE(t.shutdown(wait_budget));
}
