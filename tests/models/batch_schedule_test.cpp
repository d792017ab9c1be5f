#include "models/batch_schedule.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "messages/errors.hpp"
#include "models/keyed_permutation.hpp"

using namespace keel;

TEST_CASE("a keyed permutation is a bijection of 0..n-1 with a working inverse") {
  for (uint64_t n : {1ull, 2ull, 3ull, 17ull, 1000ull, 4097ull, 65536ull}) {
    keyed_permutation p(n, 12345 + n);
    std::vector<bool> seen(n, false);
    for (uint64_t x = 0; x < n; ++x) {
      const uint64_t y = p(x);
      REQUIRE(y < n);
      CHECK(!seen[y]);
      seen[y] = true;
      CHECK(p.inverse(y) == x);
    }
  }
}

TEST_CASE("different keys give different permutations") {
  keyed_permutation a(1000, 1), b(1000, 2);
  int same = 0;
  for (uint64_t x = 0; x < 1000; ++x) same += a(x) == b(x) ? 1 : 0;
  CHECK(same < 20);
}

TEST_CASE("a batch is a deterministic function of (seed, epoch, worker, step)") {
  batch_position at{7, 3, 5, 1, 4, 16};
  std::vector<uint64_t> a, b;
  REQUIRE(!batch_indices(60000, at, a));
  REQUIRE(!batch_indices(60000, at, b));
  CHECK(a == b);
  CHECK(a.size() == 16);
  auto differs = [&](batch_position other) {
    std::vector<uint64_t> c;
    REQUIRE(!batch_indices(60000, other, c));
    return c != a;
  };
  batch_position p = at;
  p.seed = 8;
  CHECK(differs(p));
  p = at;
  p.epoch = 4;
  CHECK(differs(p));
  p = at;
  p.worker = 2;
  CHECK(differs(p));
  p = at;
  p.step = 6;
  CHECK(differs(p));
}

TEST_CASE("within an epoch the workers' batches partition the examples") {
  const uint64_t n = 1000;
  const uint32_t workers = 3, batch = 7;
  const uint64_t steps = steps_per_epoch(n, workers, batch);
  CHECK(steps == 47);  // floor(floor(1000 / 3) / 7)
  std::set<uint64_t> seen;
  std::vector<uint64_t> out;
  for (uint32_t w = 0; w < workers; ++w)
    for (uint64_t s = 0; s < steps; ++s) {
      REQUIRE(!batch_indices(n, {11, 2, s, w, workers, batch}, out));
      for (uint64_t i : out) {
        CHECK(i < n);
        CHECK(seen.insert(i).second);  // no example twice in an epoch
      }
    }
  CHECK(seen.size() == workers * steps * batch);
}

TEST_CASE("one worker's epoch visits every example once when the batch divides the data") {
  std::vector<uint64_t> all, out;
  for (uint64_t s = 0; s < steps_per_epoch(96, 1, 8); ++s) {
    REQUIRE(!batch_indices(96, {5, 0, s, 0, 1, 8}, out));
    all.insert(all.end(), out.begin(), out.end());
  }
  std::sort(all.begin(), all.end());
  for (uint64_t i = 0; i < 96; ++i) CHECK(all[i] == i);
}

TEST_CASE("successive epochs visit the examples in different orders") {
  std::vector<uint64_t> e0, e1;
  REQUIRE(!batch_indices(10000, {1, 0, 0, 0, 1, 64}, e0));
  REQUIRE(!batch_indices(10000, {1, 1, 0, 0, 1, 64}, e1));
  CHECK(e0 != e1);
}

TEST_CASE("a batch position out of range is an invalid_argument error naming the field") {
  std::vector<uint64_t> out;
  auto err = batch_indices(100, {1, 0, 0, 2, 2, 10}, out);
  CHECK(is(err, errc::invalid_argument));
  CHECK(describe(err).find("worker") != std::string::npos);
  err = batch_indices(100, {1, 0, 5, 0, 2, 10}, out);
  CHECK(is(err, errc::invalid_argument));
  CHECK(describe(err).find("step 5") != std::string::npos);
  CHECK(is(batch_indices(100, {1, 0, 0, 0, 0, 10}, out), errc::invalid_argument));
  CHECK(is(batch_indices(100, {1, 0, 0, 0, 1, 0}, out), errc::invalid_argument));
}

TEST_CASE("a global step splits into epoch and step") {
  auto es = split_global_step(95, 47);
  CHECK(es.epoch == 2);
  CHECK(es.step == 1);
}
