// The supervisor's pure arithmetic: intensity windows, backoff delays and
// snapshot choice, without actors.
#include <doctest/doctest.h>

#include "messages/errors.hpp"
#include "supervision/backoff.hpp"
#include "supervision/restart_intensity.hpp"
#include "supervision/snapshot.hpp"

using namespace keel;
using namespace keel::supervision;
using namespace std::chrono_literals;

TEST_CASE("restart intensity admits N restarts within T and refuses the next") {
  restart_intensity in(3, 5s);
  clock::time_point t{};
  CHECK(in.admit(t));
  CHECK(in.admit(t + 1s));
  CHECK(in.admit(t + 2s));
  CHECK_FALSE(in.admit(t + 3s));
}

TEST_CASE("restarts older than the intensity period no longer count") {
  restart_intensity in(1, 5s);
  clock::time_point t{};
  CHECK(in.admit(t));
  CHECK(in.admit(t + 5s));  // the first one left the window exactly now
  CHECK_FALSE(in.admit(t + 9s));
  CHECK(in.admit(t + 20s));
}

TEST_CASE("backoff doubles from min to max and jitter scales by at most 1 + random_factor") {
  backoff b;
  b.min_delay = 100ms;
  b.max_delay = 1s;
  CHECK(b.delay(1, 0.0) == 100ms);
  CHECK(b.delay(2, 0.0) == 200ms);
  CHECK(b.delay(4, 0.0) == 800ms);
  CHECK(b.delay(5, 0.0) == 1s);
  CHECK(b.delay(1000, 0.0) == 1s);
  b.random_factor = 0.5;
  CHECK(b.delay(1, 0.0) == 100ms);
  CHECK(b.delay(1, 0.5) == 125ms);
  CHECK(b.delay(1, 0.999) < 150ms);
}

TEST_CASE("a backoff without min_delay restarts at once, as OTP does") {
  backoff b;
  CHECK(b.delay(1, 0.7) == 0ns);
  CHECK(b.delay(50, 0.7) == 0ns);
}

TEST_CASE("the newest snapshot that passes validation is chosen and the rejected are named") {
  auto s3 = snapshot::of("s3", std::make_shared<const int>(3));
  auto s2 = snapshot::of("s2", std::make_shared<const int>(2));
  auto s1 = snapshot::of("s1", std::make_shared<const int>(1));
  auto reject_s3_and_s2 = [](const snapshot& s) -> caf::error {
    if (*s.as<int>() >= 2)
      return make_error(errc::damaged_snapshot, "bad checksum");
    return {};
  };
  auto choice = choose_snapshot({s3, s2, s1}, reject_s3_and_s2);
  CHECK(choice.chosen.label == "s1");
  REQUIRE(choice.rejected.size() == 2);
  CHECK(choice.rejected[0] == "s3: damaged_snapshot: bad checksum");
  CHECK(choice.rejected[1].rfind("s2: ", 0) == 0);
}

TEST_CASE("with no valid snapshot the choice is empty") {
  CHECK_FALSE(choose_snapshot({}, nullptr).chosen);
  auto empty = snapshot{"broken", nullptr, nullptr};
  auto choice = choose_snapshot({empty}, nullptr);
  CHECK_FALSE(choice.chosen);
  CHECK(choice.rejected.size() == 1);
}

TEST_CASE("a snapshot hands its payload back only as the type it was made from") {
  auto s = snapshot::of("x", std::make_shared<const int>(7));
  REQUIRE(s.as<int>());
  CHECK(*s.as<int>() == 7);
  CHECK_FALSE(s.as<double>());
}
