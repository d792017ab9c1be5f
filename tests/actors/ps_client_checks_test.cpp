// What a ps_client checks and how it answers a loop that retries
// (actors/job/ps_client.hpp, actors/core/client_channel.hpp): a pull asked
// again after its wait ran out is answered, a gradient that is not finite is
// refused by name (or, with the check off, skipped by the worker), and a job
// of numbers outside keel's bounds is refused before it starts
// (actors/job/config_bounds.hpp).
#include <cmath>
#include <limits>

#include <doctest/doctest.h>

#include "tests/actors/job_fixture.hpp"

namespace keel::test {
namespace {

using pulled_ptr = std::shared_ptr<const pulled_step>;

constexpr auto patience = std::chrono::seconds(60);  // any single answer

bool says(const caf::error& e, const std::string& what) {
  return describe(e).find(what) != std::string::npos;
}

// Pulls and pushes step `s` of `c` with a zero gradient.
void zero_step(ps_client& c, uint64_t s) {
  auto p = c.pull(s).wait(patience);
  REQUIRE_MESSAGE(p, describe(p.error()));
  auto done = c.push(s, c.gradient_for(**p)).wait(patience);
  REQUIRE_MESSAGE(done, describe(done.error()));
}

}  // namespace

TEST_CASE("a pull asked again after its wait ran out gets the first pull's answer") {
  temp_dir dir;
  auto cfg = config_for(probe(), dir, 4);
  cfg.application_loop = true;  // two workers, BSP
  auto j = job::start(cfg);
  REQUIRE_MESSAGE(j, describe(j.error()));
  auto c0 = (*j)->client(0), c1 = (*j)->client(1);
  REQUIRE(c0);
  REQUIRE(c1);
  zero_step(*c0, 0);
  auto p1 = c1->pull(0).wait(patience);  // worker 1 holds step 0, not pushed yet
  REQUIRE_MESSAGE(p1, describe(p1.error()));
  // Under BSP worker 0's step 1 waits for worker 1's step-0 push.
  auto first = c0->pull(1);
  auto waited = first.wait(std::chrono::milliseconds(200));
  REQUIRE(!waited);
  CHECK(is(waited.error(), errc::timeout));
  pulled_ptr answer;
  SUBCASE("asked again before the answer: answered when it comes") {
    auto again = c0->pull(1);
    CHECK(!again.ready());
    auto other_keys = c0->pull(1, {{2}, {}}).wait(patience);
    REQUIRE(!other_keys);
    CHECK(is(other_keys.error(), errc::invalid_argument));
    CHECK(says(other_keys.error(), "other keys"));
    auto pushed = c1->push(0, c1->gradient_for(**p1)).wait(patience);
    REQUIRE_MESSAGE(pushed, describe(pushed.error()));
    auto a = again.wait(patience);
    REQUIRE_MESSAGE(a, describe(a.error()));
    answer = *a;
  }
  SUBCASE("asked again once the first was answered: answered at once") {
    auto pushed = c1->push(0, c1->gradient_for(**p1)).wait(patience);
    REQUIRE_MESSAGE(pushed, describe(pushed.error()));
    REQUIRE(first.wait(patience));  // the application stopped looking; keel answered
    auto again = c0->pull(1);
    CHECK(again.ready());
    auto a = again.wait(patience);
    REQUIRE_MESSAGE(a, describe(a.error()));
    answer = *a;
  }
  auto f = first.wait(patience);
  REQUIRE_MESSAGE(f, describe(f.error()));
  CHECK(answer == *f);  // the same step's parameters, not a second request
  CHECK(answer->step == 1);
  // The loop goes on from the retried pull: the push of step 1 is taken.
  auto done = c0->push(1, c0->gradient_for(*answer)).wait(patience);
  REQUIRE_MESSAGE(done, describe(done.error()));
  CHECK(*done == 1);
}

TEST_CASE("a push of a gradient that is not finite is refused naming the tensor or table and the element") {
  temp_dir dir;
  auto cfg = config_for(probe_with_table(), dir, 4);
  cfg.training.workers = 1;
  cfg.application_loop = true;
  auto j = job::start(cfg);
  REQUIRE_MESSAGE(j, describe(j.error()));
  auto c = (*j)->client(0);
  REQUIRE(c);
  CHECK(c->checks_finite());  // on by default
  auto p = c->pull(0, {{}, {{3, 5}}}).wait(patience);
  REQUIRE_MESSAGE(p, describe(p.error()));
  auto g = c->gradient_for(**p);
  SUBCASE("a dense tensor's element") {
    g.dense[7] = std::numeric_limits<float>::quiet_NaN();
    auto refused = c->push(0, g).wait(patience);
    REQUIRE(!refused);
    CHECK(is(refused.error(), errc::invalid_argument));
    CHECK_MESSAGE(says(refused.error(), "push of step 0: the gradient of probe.dense[7] is NaN"),
                  describe(refused.error()));
    g.dense[7] = 0;
  }
  SUBCASE("a table row's element") {
    g.tables.at(0).rows.at(probe_model::table_dim + 2) = -std::numeric_limits<float>::infinity();
    auto refused = c->push(0, g).wait(patience);
    REQUIRE(!refused);
    CHECK_MESSAGE(says(refused.error(), "probe.table[row 1 of key 5, element 2] is -inf"),
                  describe(refused.error()));
    g.tables.at(0).rows.at(probe_model::table_dim + 2) = 0;
  }
  // Refused before the worker saw it: the step's push is still to make.
  auto done = c->push(0, g).wait(patience);
  REQUIRE_MESSAGE(done, describe(done.error()));
  CHECK(*done == 0);
}

TEST_CASE("with the finiteness check off a gradient that is not finite is pushed and the worker skips its step") {
  temp_dir dir;
  auto cfg = config_for(probe(), dir, 3);
  cfg.training.workers = 1;
  cfg.application_loop = true;
  auto j = job::start(cfg);
  REQUIRE_MESSAGE(j, describe(j.error()));
  auto c = (*j)->client(0);
  REQUIRE(c);
  c->check_finite(false);
  auto p0 = c->pull(0).wait(patience);
  REQUIRE_MESSAGE(p0, describe(p0.error()));
  auto g = c->gradient_for(**p0);
  g.dense[7] = std::numeric_limits<float>::quiet_NaN();
  auto done = c->push(0, g).wait(patience);
  REQUIRE_MESSAGE(done, describe(done.error()));
  CHECK(*done == 0);
  auto p1 = c->pull(1).wait(patience);
  REQUIRE_MESSAGE(p1, describe(p1.error()));
  CHECK((*p1)->dense == (*p0)->dense);  // nothing of step 0 was applied
  zero_step(*c, 1);
  zero_step(*c, 2);
  auto r = (*j)->wait(patience);
  REQUIRE_MESSAGE(r, describe(r.error()));
  CHECK(count(*r, event_kind::skipped_step) == 1);
}

TEST_CASE("a job of numbers outside keel's bounds is refused before it starts, naming the field") {
  temp_dir dir;
  auto cfg = config_for(probe(), dir, 4);
  cfg.application_loop = true;
  std::string field, why;
  SUBCASE("10^9 workers") {
    cfg.training.workers = 1000000000;
    field = "training.workers";
    why = "1000000000 is too large (at most 1024)";
  }
  SUBCASE("no workers") {
    cfg.training.workers = 0;
    field = "training.workers";
    why = "0 is too small (at least 1)";
  }
  SUBCASE("a learning rate that is NaN") {
    cfg.training.optimizer.lr = std::numeric_limits<float>::quiet_NaN();
    field = "training.optimizer.lr";
    why = "nan is not a finite number";
  }
  SUBCASE("an infinite learning rate") {
    cfg.training.optimizer.lr = std::numeric_limits<float>::infinity();
    field = "training.optimizer.lr";
    why = "inf is not a finite number";
  }
  SUBCASE("a negative learning rate") {
    cfg.training.optimizer.lr = -0.5f;
    field = "training.optimizer.lr";
    why = "-0.5 is too small (at least 0)";
  }
  SUBCASE("a per-parameter rule's learning rate") {
    optimizer_config rule;
    rule.lr = 2e6f;
    cfg.training.rules["probe.dense"] = rule;
    field = "training.rules[probe.dense].lr";
    why = "2e+06 is too large (at most 1e+06)";
  }
  SUBCASE("a request timeout of 0") {
    cfg.recovery.request_timeout = std::chrono::milliseconds(0);
    field = "recovery.request_timeout";
    why = "0 ms is too small (at least 1 ms)";
  }
  SUBCASE("a negative stall timeout") {
    cfg.recovery.stall_timeout = std::chrono::milliseconds(-1);
    field = "recovery.stall_timeout";
    why = "-1 ms is too small (at least 0 ms)";
  }
  auto problem = check_bounds(cfg);
  REQUIRE(problem);
  CHECK(problem->field == field);
  CHECK(problem->why == why);
  auto j = job::start(cfg);
  REQUIRE(!j);
  CHECK(is(j.error(), errc::invalid_argument));
  CHECK(describe(j.error()).find(field + ": " + why) != std::string::npos);
  CHECK(std::filesystem::is_empty(dir.path()));  // refused before the directory was touched
}

}  // namespace keel::test
