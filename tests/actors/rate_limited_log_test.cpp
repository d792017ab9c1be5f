#include "actors/net/rate_limited_log.hpp"

#include <string>
#include <vector>

#include <doctest/doctest.h>

using keel::rate_limited_log;
using namespace std::chrono_literals;

TEST_CASE("a rate-limited log writes a burst per window, then one line counting what it dropped") {
  std::vector<std::string> out;
  rate_limited_log log([&](const std::string& l) { out.push_back(l); }, 2, 1000ms, "refusals");
  rate_limited_log::clock::time_point t0{std::chrono::hours(1)};
  for (int i = 0; i < 5; ++i)
    log("refusal " + std::to_string(i), t0 + std::chrono::milliseconds(i));
  REQUIRE(out.size() == 2);
  CHECK(out[1] == "refusal 1");
  CHECK(log.next_flush() == t0 + 1000ms);
  log.flush(t0 + 999ms);
  CHECK(out.size() == 2);
  log.flush(t0 + 1000ms);
  REQUIRE(out.size() == 3);
  CHECK(out[2] == "3 more refusals in 1000 ms not logged one by one");
  CHECK(log.dropped_total() == 3);
  CHECK(log.next_flush() == rate_limited_log::clock::time_point::max());
  log("refusal 5", t0 + 1001ms);  // a new window
  CHECK(out.back() == "refusal 5");
}
