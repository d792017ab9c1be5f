// The policy of keel's bounded endpoints, without a socket: which
// connection gives way to a newer one at the cap, and when a newer one
// waits instead.
#include "actors/net/connection_slots.hpp"

#include <doctest/doctest.h>

using keel::connection_slots;
using action = connection_slots::decision::action;
using namespace std::chrono_literals;

namespace {
const connection_slots::clock::time_point t0{std::chrono::hours(1)};
}

TEST_CASE(
    "below the cap every connection is admitted, and at it the oldest idle one gives way once its "
    "grace is over") {
  connection_slots slots(3, 100ms);
  auto a = slots.add(t0);
  CHECK(slots.next(t0 + 1ms).what == action::admit);
  auto b = slots.add(t0 + 1ms);
  slots.add(t0 + 2ms);
  auto early = slots.next(t0 + 50ms);
  CHECK(early.what == action::wait);
  CHECK(early.retry_at == t0 + 100ms);
  auto due = slots.next(t0 + 100ms);
  REQUIRE(due.what == action::evict_then_admit);
  CHECK(due.victim == a);
  slots.release(a);
  slots.add(t0 + 100ms);
  auto after = slots.next(t0 + 200ms);
  REQUIRE(after.what == action::evict_then_admit);
  CHECK(after.victim == b);
  CHECK(slots.open() == 3);
}

TEST_CASE(
    "a connection whose response is being written never gives way, and an answered one gives way "
    "first, grace or not") {
  connection_slots slots(2, 100ms);
  auto a = slots.add(t0);
  auto b = slots.add(t0 + 1ms);
  slots.writing(a);
  auto d = slots.next(t0 + 500ms);
  REQUIRE(d.what == action::evict_then_admit);
  CHECK(d.victim == b);  // the younger, idle one: a's answer keeps its slot
  slots.writing(b);
  auto full = slots.next(t0 + 500ms);
  CHECK(full.what == action::wait);
  CHECK(full.retry_at == connection_slots::clock::time_point::max());  // until a slot changes
  slots.written(b);
  auto answered = slots.next(t0 + 2ms);
  REQUIRE(answered.what == action::evict_then_admit);
  CHECK(answered.victim == b);
}

TEST_CASE("a released slot is free, and releasing it again changes nothing") {
  connection_slots slots(1, 100ms);
  auto a = slots.add(t0);
  CHECK(slots.next(t0).what == action::wait);
  slots.release(a);
  slots.release(a);
  CHECK(slots.open() == 0);
  CHECK(slots.next(t0).what == action::admit);
}
