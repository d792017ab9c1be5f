// Elastic workers' schedule (actors/core/worker_schedule.hpp): which worker
// takes part in which step, its text form, and the batches it deals.
#include "actors/core/worker_schedule.hpp"

#include <doctest/doctest.h>

#include <set>

#include "messages/errors.hpp"

using namespace keel;

TEST_CASE("a worker schedule says who takes part in each step, from its text form and back") {
  auto s = worker_schedule::parse("join:worker:3@100,leave:worker:0@250,join:worker:2@40,leave:worker:2@300", 4, 400);
  REQUIRE_MESSAGE(s, describe(s.error()));
  CHECK(s->elastic());
  CHECK(s->slots() == 4);
  CHECK(s->count(0) == 2);    // workers 0 and 1
  CHECK(s->count(40) == 3);   // 2 joined
  CHECK(s->count(100) == 4);  // 3 joined
  CHECK(s->count(250) == 3);  // 0 left
  CHECK(s->count(300) == 2);  // 2 left
  CHECK(s->active(0, 249));
  CHECK_FALSE(s->active(0, 250));
  CHECK_FALSE(s->active(3, 99));
  CHECK(s->active(3, 100));
  CHECK(s->changes() == std::vector<uint64_t>{40, 100, 250, 300});
  CHECK(s->worker_steps(400) == 250 + 400 + 260 + 300);
  CHECK(s->to_string() == "join:worker:2@40,join:worker:3@100,leave:worker:0@250,leave:worker:2@300");
  auto back = worker_schedule::parse(s->to_string(), 4, 400);
  REQUIRE(back);
  CHECK(back->to_string() == s->to_string());
  // No changes: every worker throughout, the static job.
  auto none = worker_schedule::parse("", 3, 10);
  REQUIRE(none);
  CHECK_FALSE(none->elastic());
  CHECK(none->count(9) == 3);
  CHECK(none->worker_steps(10) == 30);
}

TEST_CASE("a worker schedule deals each step's batches among its active workers: disjoint, and the static job's when nothing changed") {
  const uint64_t examples = 1000;
  const uint32_t batch = 10;
  worker_schedule fixed(2);
  auto s = worker_schedule::parse("join:worker:2@30,leave:worker:0@60", 3, 100);
  REQUIRE(s);
  std::vector<uint64_t> idx;
  for (uint64_t step : {0ull, 7ull, 29ull, 30ull, 45ull, 59ull, 60ull, 99ull}) {
    CAPTURE(step);
    std::set<uint64_t> seen;
    size_t dealt = 0;
    for (uint32_t w = 0; w < 3; ++w) {
      if (!s->active(w, step))
        continue;
      auto at = s->batch_at(7, w, step, batch, examples);
      REQUIRE(!batch_indices(examples, at, idx));
      seen.insert(idx.begin(), idx.end());
      dealt += idx.size();
      if (step < 30) {  // before the first change: the static job's batches
        auto plain = fixed.batch_at(7, w, step, batch, examples);
        std::vector<uint64_t> expect;
        REQUIRE(!batch_indices(examples, plain, expect));
        CHECK(idx == expect);
        auto es = split_global_step(step, steps_per_epoch(examples, 2, batch));
        CHECK(plain.epoch == es.epoch);
        CHECK(plain.step == es.step);
        CHECK(plain.worker == w);
      }
    }
    CHECK(seen.size() == dealt);  // no example twice in a step
    CHECK(dealt == s->count(step) * batch);
  }
  // After a change, a pass of its own: ranks among the active workers.
  auto at = s->batch_at(7, 2, 60, batch, examples);
  CHECK(at.worker == 1);  // workers 1 and 2 remain
  CHECK(at.num_workers == 2);
  CHECK(at.step == 0);
  CHECK(at.seed != 7);
}

TEST_CASE("a worker schedule refuses a change that names no worker, no step, an empty span or a step without workers, naming it") {
  auto refused = [](const std::string& text, uint32_t slots, const std::string& says) {
    auto s = worker_schedule::parse(text, slots, 100);
    REQUIRE_MESSAGE(!s, text);
    CHECK_MESSAGE(describe(s.error()).find(says) != std::string::npos, describe(s.error()));
  };
  refused("join:worker:4@10", 4, "'join:worker:4@10': the job has workers 0 to 3");
  refused("join:node:1@10", 4, "expected join:worker:W@STEP");
  refused("leave:worker:1", 4, "expected join:worker:W@STEP");
  refused("leave:worker:x@3", 4, "whole numbers");
  refused("join:worker:1@0", 4, "between 1 and 99");
  refused("leave:worker:1@100", 4, "between 1 and 99");
  refused("join:worker:1@10,join:worker:1@20", 4, "joins once at most");
  refused("join:worker:1@50,leave:worker:1@20", 4, "worker 1 would run no step");
  refused("leave:worker:0@10", 1, "no worker is active at step 10");
  refused("join:worker:0@10,join:worker:1@5", 2, "no worker is active at step 0");
}

TEST_CASE("a worker schedule holds workers in reserve and changes at runtime from a step on, refusing what cannot be") {
  auto s = worker_schedule::parse("reserve:worker:2,leave:worker:1@50", 3, 100);
  REQUIRE_MESSAGE(s, describe(s.error()));
  CHECK(s->reserved(2));
  CHECK_FALSE(s->active(2, 99));
  CHECK(s->count(10) == 2);
  CHECK(s->worker_steps(100) == 150);
  CHECK(s->to_string() == "leave:worker:1@50,reserve:worker:2");
  auto back = worker_schedule::parse(s->to_string(), 3, 100);
  REQUIRE(back);
  CHECK(back->to_string() == s->to_string());
  // Worker 2 joins and worker 0 leaves at step 30, together.
  auto c = s->changed("join:worker:2,leave:worker:0", 30, 100);
  REQUIRE_MESSAGE(c, describe(c.error()));
  CHECK(c->to_string() == "leave:worker:0@30,join:worker:2@30,leave:worker:1@50");
  CHECK(c->count(29) == 2);
  CHECK(c->count(30) == 2);
  CHECK(c->count(50) == 1);
  // A schedule without changes gets its first at runtime.
  auto plain = worker_schedule(2).changed("leave:worker:1", 10, 20);
  REQUIRE_MESSAGE(plain, describe(plain.error()));
  CHECK(plain->to_string() == "leave:worker:1@10");
  auto refused = [&](const worker_schedule& from, const std::string& items, uint64_t at, const std::string& why) {
    auto r = from.changed(items, at, 100);
    REQUIRE(!r);
    CHECK_MESSAGE(describe(r.error()).find(why) != std::string::npos, describe(r.error()));
  };
  refused(*s, "join:worker:0", 30, "is not held in reserve");
  refused(*s, "leave:worker:1", 60, "has left already");
  refused(*s, "leave:worker:2", 30, "has not joined by step 30");
  refused(*s, "leave:worker:0", 60, "no worker is active at step 60");
  refused(*s, "join:worker:9", 30, "the job has workers 0 to 2");
  refused(*s, "grow", 30, "expected join:worker:W or leave:worker:W");
  CHECK(!worker_schedule::parse("reserve:worker:x", 3, 100));
  CHECK(s->check(3) == caf::error{});
  CHECK(s->check(4) != caf::error{});
}
